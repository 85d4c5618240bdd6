package dispatch_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// The package's JSON is the placement seam's wire shape: field names are
// pinned here, so a rename fails the build of every transport at once.
func TestExecutionPackageJSONShape(t *testing.T) {
	cases := []struct {
		pkg  dispatch.ExecutionPackage
		json string
		kind string
	}{
		{dispatch.ExecutionPackage{ExecutionID: "o-1", FlowID: "orders", Input: json.RawMessage(`{"sku":"x"}`)},
			`{"executionId":"o-1","flowId":"orders","input":{"sku":"x"}}`, "start"},
		{dispatch.ExecutionPackage{ExecutionID: "o-1", FlowID: "orders"},
			`{"executionId":"o-1","flowId":"orders"}`, "start"},
		{dispatch.ExecutionPackage{ExecutionID: "o-1", FlowID: "orders", Resume: &dispatch.ResumeHint{EventType: "approve", Payload: json.RawMessage(`true`)}},
			`{"executionId":"o-1","flowId":"orders","resume":{"eventType":"approve","payload":true}}`, "resume"},
		{dispatch.ExecutionPackage{ExecutionID: "o-1", FlowID: "orders", Resume: &dispatch.ResumeHint{Recover: true}},
			`{"executionId":"o-1","flowId":"orders","resume":{"recover":true}}`, "recover"},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.pkg)
		if err != nil || string(b) != c.json {
			t.Fatalf("marshal: %s (%v), want %s", b, err, c.json)
		}
		back, err := dispatch.DecodePackage(b)
		if err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		if again, _ := json.Marshal(back); !bytes.Equal(again, b) || back.Kind() != c.kind {
			t.Fatalf("round trip %s → %s (%s), want %s (%s)", b, again, back.Kind(), b, c.kind)
		}
	}
}

func TestExecutionResultJSONShape(t *testing.T) {
	cases := map[string]dispatch.ExecutionResult{
		`{"executionId":"o-1","status":"suspended","suspendedOn":"approve","sequence":3}`:          {ExecutionID: "o-1", Status: fold.StatusSuspended, SuspendedOn: "approve", Sequence: 3},
		`{"executionId":"o-1","status":"completed","output":{"n":12345678901234567},"sequence":7}`: {ExecutionID: "o-1", Status: fold.StatusCompleted, Output: json.RawMessage(`{"n":12345678901234567}`), Sequence: 7},
		`{"executionId":"o-1","status":"failed","error":"card declined","sequence":5}`:             {ExecutionID: "o-1", Status: fold.StatusFailed, Error: "card declined", Sequence: 5},
	}
	for want, r := range cases {
		if b, err := json.Marshal(r); err != nil || string(b) != want {
			t.Fatalf("marshal: %s (%v), want %s", b, err, want)
		}
	}
}

func TestValidateRefusesWithTypedErrors(t *testing.T) {
	big := `"` + strings.Repeat("x", dispatch.MaxPayloadBytes/2) + `"`
	cases := []struct {
		name     string
		pkg      dispatch.ExecutionPackage
		field    string
		envelope bool // also matches event.ErrInvalidEnvelope
	}{
		{"empty execution id", dispatch.ExecutionPackage{FlowID: "f"}, "executionId", true},
		{"control character", dispatch.ExecutionPackage{ExecutionID: "a\nb", FlowID: "f"}, "executionId", true},
		{"long id", dispatch.ExecutionPackage{ExecutionID: strings.Repeat("a", event.MaxIDBytes+1), FlowID: "f"}, "executionId", true},
		{"empty flow id", dispatch.ExecutionPackage{ExecutionID: "x"}, "flowId", true},
		{"input not JSON", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Input: json.RawMessage(`{`)}, "input", false},
		{"input not UTF-8", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Input: json.RawMessage("\"\xff\"")}, "input", false},
		{"input on a resume", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Input: json.RawMessage(`1`), Resume: &dispatch.ResumeHint{EventType: "g"}}, "input", false},
		{"empty hint", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Resume: &dispatch.ResumeHint{}}, "resume.eventType", false},
		{"recover with a payload", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Resume: &dispatch.ResumeHint{Recover: true, Payload: json.RawMessage(`1`)}}, "resume", false},
		{"kernel re-drive type", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Resume: &dispatch.ResumeHint{EventType: "EXECUTION_RECOVERED"}}, "resume.eventType", false},
		{"bad event type", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Resume: &dispatch.ResumeHint{EventType: "g\x00"}}, "resume.eventType", true},
		{"payload not JSON", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Resume: &dispatch.ResumeHint{EventType: "g", Payload: json.RawMessage(`nope`)}}, "resume.payload", false},
		{"credentials not JSON", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Resume: &dispatch.ResumeHint{EventType: "g", Credentials: json.RawMessage(`s3cret`)}}, "resume.credentials", false},
		{"principal not JSON", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Principal: json.RawMessage(`{`)}, "principal", false},
		{"principal with an over-long tenant", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f",
			Principal: json.RawMessage(`{"id":"q","tenant":"` + strings.Repeat("t", 200) + `"}`)}, "principal", false},
		{"principal on a resume", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f", Principal: json.RawMessage(`"who"`),
			Resume: &dispatch.ResumeHint{EventType: "g"}}, "principal", false},
		{"payload and credentials over the cap together", dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f",
			Resume: &dispatch.ResumeHint{EventType: "g", Payload: json.RawMessage(big), Credentials: json.RawMessage(big + " ")}}, "input/payload/credentials", true},
	}
	for _, c := range cases {
		err := c.pkg.Validate()
		var pe *dispatch.PackageError
		if !errors.As(err, &pe) || pe.Field != c.field || !errors.Is(err, dispatch.ErrInvalidPackage) {
			t.Errorf("%s: %v, want a *PackageError on %s", c.name, err, c.field)
			continue
		}
		if errors.Is(err, event.ErrInvalidEnvelope) != c.envelope {
			t.Errorf("%s: errors.Is(event.ErrInvalidEnvelope) = %v, want %v", c.name, !c.envelope, c.envelope)
		}
		if dispatch.IsRetryable(err) {
			t.Errorf("%s: an invalid package is retryable", c.name)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error echoes the credentials: %v", c.name, err)
		}
	}
}

func TestValidateAccepts(t *testing.T) {
	atCap := json.RawMessage(`"` + strings.Repeat("x", dispatch.MaxPayloadBytes-2) + `"`)
	for name, pkg := range map[string]dispatch.ExecutionPackage{
		"input at the cap":    {ExecutionID: "x", FlowID: "f", Input: atCap},
		"null input resume":   {ExecutionID: "x", FlowID: "f", Input: json.RawMessage(`null`), Resume: &dispatch.ResumeHint{EventType: "g"}},
		"resume without data": {ExecutionID: "x", FlowID: "f", Resume: &dispatch.ResumeHint{EventType: "g"}},
		"unicode ids":         {ExecutionID: "commande-é-1", FlowID: "flux/α"},
	} {
		if err := pkg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDecodePackageIsStrict(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":       `executionId=x`,
		"unknown field":  `{"executionId":"x","flowId":"f","code":"rm -rf /"}`,
		"misspelled":     `{"executionID":"x","flowId":"f"}`,
		"other case":     `{"executionId":"x","FLOWID":"f"}`,
		"hint case":      `{"executionId":"x","flowId":"f","resume":{"EventType":"g"}}`,
		"trailing data":  `{"executionId":"x","flowId":"f"} {}`,
		"array":          `[{"executionId":"x","flowId":"f"}]`,
		"invalid fields": `{"executionId":"","flowId":"f"}`,
		"hint unknown":   `{"executionId":"x","flowId":"f","resume":{"eventType":"g","closure":"func(){}"}}`,
	} {
		if _, err := dispatch.DecodePackage([]byte(body)); !errors.Is(err, dispatch.ErrInvalidPackage) {
			t.Errorf("%s: %v, want dispatch.ErrInvalidPackage", name, err)
		}
	}
}

// Logging a package shows where it goes, never what it carries.
func TestPackageLogValueOmitsData(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("dispatch", "pkg", dispatch.ExecutionPackage{ExecutionID: "o-1", FlowID: "orders",
		Resume: &dispatch.ResumeHint{EventType: "approve", Payload: json.RawMessage(`"card-4242"`), Credentials: json.RawMessage(`"tok-s3cret"`)}})
	out := buf.String()
	for _, secret := range []string{"card-4242", "tok-s3cret"} {
		if strings.Contains(out, secret) {
			t.Fatalf("log line leaks %q: %s", secret, out)
		}
	}
	for _, want := range []string{`"executionId":"o-1"`, `"kind":"resume"`, `"eventType":"approve"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("log line %s lacks %s", out, want)
		}
	}
}

func TestResultFromState(t *testing.T) {
	cases := []struct {
		st   fold.State
		want dispatch.ExecutionResult
	}{
		{fold.State{Status: fold.StatusSuspended, Sequence: 3, Variables: fold.Variables{SuspendedOn: &fold.Suspension{On: "approve"}}},
			dispatch.ExecutionResult{ExecutionID: "x", Status: fold.StatusSuspended, SuspendedOn: "approve", Sequence: 3}},
		{fold.State{Status: fold.StatusFailed, Sequence: 4, Variables: fold.Variables{Error: json.RawMessage(`{"message":"boom"}`)}},
			dispatch.ExecutionResult{ExecutionID: "x", Status: fold.StatusFailed, Error: "boom", Sequence: 4}},
		{fold.State{Status: fold.StatusCancelled, Sequence: 5},
			dispatch.ExecutionResult{ExecutionID: "x", Status: fold.StatusCancelled, Sequence: 5}},
	}
	for _, c := range cases {
		if got := dispatch.ResultFromState("x", c.st); got.Status != c.want.Status || got.Error != c.want.Error ||
			got.SuspendedOn != c.want.SuspendedOn || got.Sequence != c.want.Sequence || len(got.Output) != 0 {
			t.Errorf("ResultFromState(%s) = %+v, want %+v", c.st.Status, got, c.want)
		}
	}
	done := dispatch.ResultFromState("x", fold.State{Status: fold.StatusCompleted, Variables: fold.Variables{Output: json.RawMessage(`[1,2]`)}})
	if string(done.Output) != `[1,2]` {
		t.Fatalf("completed output %s, want [1,2]", done.Output)
	}
}
