package fold

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/loom-kernel/loom/event"
)

// The log is a cross-language ABI: member names are exact (DESIGN, "Member
// names"). These tests pin what the fold makes of a payload that another
// decoder would read differently.

// fullPayloads exercises every member each handler reads.
var fullPayloads = map[string]string{
	event.ExecutionStarted: `{"input":{"q":1},"flowHash":"h","codeHash":"c","principal":{"sub":"a"},"parent":{"executionId":"p"},` +
		`"chain":{"id":"c"},"carry":{"resources":{"tokens":1},"inbox":{"t2":{"consumed":1,"seq":0}}}}`,
	event.ExecutionSuspended: `{"on":"g","wakeAt":5,"timeoutMs":6,"correlationKey":"k","stepId":"s","attempt":1,"waits":[{"waitId":"w"}]}`,
	event.ExecutionResumed:   `{"eventType":"approve","payload":{"ok":true},"waitId":"w1"}`,
	event.ExecutionCompleted: `{"output":{"ok":true}}`,
	event.ExecutionFailed:    `{"error":{"message":"x"}}`,
	event.ExecutionCancelled: `{"reason":"r"}`,
	event.ExecutionContinued: `{"nextExecutionId":"ex-2"}`,
	event.ExecutionRecovered: `{"reason":"crash"}`,
	event.ExecutionMigrated:  `{"toFlowHash":"h2","toCodeHash":"c2","migratedInput":{"q":2}}`,
	event.ExecutionDenied:    `{"stepId":"s","reason":"no"}`,
	event.StepStarted:        `{"stepId":"s","input":1,"attempt":2,"kind":"tool","toolId":"t"}`,
	event.StepCompleted:      `{"stepId":"s","output":2}`,
	event.StepFailed:         `{"stepId":"s","error":"e","channel":"c","payload":3}`,
	event.StepRetrying:       `{"stepId":"s","attempt":3,"error":"e"}`,
	event.StepCancelled:      `{"stepId":"s","reason":"r"}`,
	event.DecisionRecorded:   `{"decisionId":"d","choice":"a","context":{"c":1},"policy":{"p":1},"innerSteps":["x"]}`,
	event.TimerFired:         `{"wakeAt":5}`,
	event.EffectInDoubt:      `{"stepId":"s","attempt":1}`,
	event.EffectDenied:       `{"stepId":"s","reason":"grant"}`,
	event.EgressDenied:       `{"stepId":"s","reason":"host"}`,
	event.SafetyBlocked:      `{"stepId":"s","reason":"pii"}`,
	event.ResourceMetered:    `{"tokens":1,"costUsd":0.5,"ms":2,"memBytes":3,"wallMs":4,"netBytes":5,"custom":{"gpu":1}}`,
	event.QuotaExceeded:      `{"dimension":"tokens","reason":"cap"}`,
	event.OutcomeRecorded:    `{"outcome":1,"recordedBy":"e","late":true}`,
	event.ApprovalGranted:    `{"principal":"ann","gate":"g"}`,
	event.PayloadShredded:    `{"subject":"u"}`,
	event.MessageConsumed:    `{"topic":"t","messageId":"m","waitId":"w2","payload":1}`,
	event.ParallelCompleted:  `{"scopeId":"p","status":"completed","branches":2,"failed":1}`,
	event.EventsRehomed:      `{"fromExecutionId":"x","count":2}`,
	event.InboxQuarantined:   `{"topic":"t","messageId":"m2"}`,
	event.InboxReleased:      `{"topic":"t","messageId":"m","operator":"op"}`,
}

// exactBase is where each payload lands: a kernel-stamped log (so Wave 2
// kinds fold), parked on a gate with waits, a held message and a running
// step; EXECUTION_STARTED lands on an empty log.
func exactBase(typ string) *logBuilder {
	if typ == event.ExecutionStarted {
		return newLog()
	}
	return newLog().started().
		add(event.StepStarted, `{"stepId":"s","input":0}`).
		kernel(event.InboxQuarantined, `{"topic":"t","messageId":"m"}`).
		add(event.ExecutionSuspended, `{"on":"approve","waits":[{"waitId":"w1","kind":"gate"}]}`)
}

// foldWith folds exactBase(typ) and one kernel-stamped typ event.
func foldWith(t *testing.T, typ, payload string) string {
	t.Helper()
	base := exactBase(typ)
	return mustEncode(t, Fold(append(base.evs, newLogAt(base, typ, payload, true))))
}

// members splits a well-formed object payload into its members.
func members(t *testing.T, payload string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func object(t *testing.T, m map[string]json.RawMessage) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// misspellings are the spellings encoding/json would have matched.
func misspellings(name string) []string {
	r := []rune(name)
	r[0] = unicode.ToUpper(r[0])
	return []string{string(r), strings.ToUpper(name), strings.ToLower(name)}
}

// TestABI_MisspelledMemberFoldsAsAbsent: for every event type and every
// member it reads, a payload spelling that member in another case folds
// exactly as the payload without it.
func TestABI_MisspelledMemberFoldsAsAbsent(t *testing.T) {
	if len(fullPayloads) != len(event.KnownTypes()) {
		t.Fatalf("fullPayloads covers %d of %d known types", len(fullPayloads), len(event.KnownTypes()))
	}
	meaningful := 0
	for _, typ := range event.KnownTypes() {
		full := members(t, fullPayloads[typ])
		for _, name := range sortedKeys(full) {
			absent := withMember(full, name, "")
			want := foldWith(t, typ, object(t, absent))
			if want != foldWith(t, typ, fullPayloads[typ]) {
				meaningful++
			}
			for _, other := range misspellings(name) {
				if other == name {
					continue
				}
				if got := foldWith(t, typ, object(t, withMember(full, name, other))); got != want {
					t.Errorf("%s with %q for %q:\n got  %s\n want %s", typ, other, name, got, want)
				}
			}
		}
	}
	if meaningful < 60 {
		t.Fatalf("only %d members changed the fold when removed: the test would prove little", meaningful)
	}
}

// withMember copies m without member name, or with it renamed to rename.
func withMember(m map[string]json.RawMessage, name, rename string) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = v
	}
	delete(out, name)
	if rename != "" {
		out[rename] = m[name]
	}
	return out
}

// TestABI_ExactSpellingWinsOverALookAlike: with both spellings present, in
// either order, the exact member counts and the other is ignored.
func TestABI_ExactSpellingWinsOverALookAlike(t *testing.T) {
	for _, c := range []struct{ typ, exact, both1, both2 string }{
		{event.DecisionRecorded, `{"decisionId":"x2","choice":2}`,
			`{"decisionId":"x2","DecisionId":"x3","choice":2,"Choice":3}`, `{"DecisionId":"x3","Choice":3,"decisionId":"x2","choice":2}`},
		{event.StepStarted, `{"stepId":"s2","input":1}`,
			`{"stepId":"s2","STEPID":"s3","input":1,"Input":2}`, `{"STEPID":"s3","Input":2,"stepId":"s2","input":1}`},
		{event.ExecutionCompleted, `{"output":1}`, `{"output":1,"Output":2}`, `{"Output":2,"output":1}`},
		{event.ExecutionResumed, `{"eventType":"approve","payload":1}`,
			`{"eventType":"approve","EventType":"x","payload":1,"Payload":2}`, `{"Payload":2,"EventType":"x","payload":1,"eventType":"approve"}`},
		{event.ExecutionStarted, `{"input":{"a":1},"carry":{"resources":{"tokens":1}}}`,
			`{"input":{"a":1},"Input":2,"carry":{"resources":{"tokens":1,"Tokens":2},"Resources":{"tokens":3}}}`,
			`{"Input":2,"input":{"a":1},"carry":{"Resources":{"tokens":3},"resources":{"Tokens":2,"tokens":1}}}`},
	} {
		want := foldWith(t, c.typ, c.exact)
		for _, p := range []string{c.both1, c.both2} {
			if got := foldWith(t, c.typ, p); got != want {
				t.Errorf("%s %s:\n got  %s\n want %s", c.typ, p, got, want)
			}
		}
	}
}

// TestABI_MalformedPayloadFoldsAsItsHandlerRule: a member name given twice
// (even with the same value), invalid UTF-8 or a lone surrogate escape, in
// any member the handler reads or not, makes the payload malformed. Each
// handler folds it as it folds a payload that does not decode (here: []):
// a step, decision or fact event is inert, an execution-level event still
// moves the status with its fields absent. EXECUTION_RESUMED, which reads
// well-formed JSON other than its wrapper as a bare answer, folds it as the
// empty wrapper {}: a null answer.
func TestABI_MalformedPayloadFoldsAsItsHandlerRule(t *testing.T) {
	for _, typ := range event.KnownTypes() {
		full := fullPayloads[typ]
		first := sortedKeys(members(t, full))[0]
		repeat := `{"` + first + `":` + string(members(t, full)[first]) + `,` + full[1:]
		malformed := map[string]string{
			"a repeated member":                repeat,
			"a repeated unknown member":        `{"zz":1,"zz":1,` + full[1:],
			"a lone surrogate":                 `{"zz":"\ud800",` + full[1:],
			"a lone surrogate in a name":       `{"\udc00":1,` + full[1:],
			"invalid UTF-8":                    "{\"zz\":\"\xff\"," + full[1:],
			"a surrogate encoded as UTF-8":     "{\"zz\":\"\xed\xa0\x80\"," + full[1:],
			"a repeat in an unknown object":    `{"zz":{"a":1,"a":2},"zz":0,` + full[1:],
			"a repeated member, at the end":    full[:len(full)-1] + `,"` + first + `":` + string(members(t, full)[first]) + `}`,
			"a lone surrogate in an opaque":    `{"zz":["\udfff"],` + full[1:],
			"a lone surrogate, reversed pair":  `{"zz":"\ude00\ud83d",` + full[1:],
			"a repeated member, another value": `{"` + first + `":null,` + full[1:],
		}
		like := `[]`
		if typ == event.ExecutionResumed {
			like = `{}`
		}
		want := foldWith(t, typ, like)
		for name, p := range malformed {
			if got := foldWith(t, typ, p); got != want {
				t.Errorf("%s, %s:\n got  %s\n want %s", typ, name, got, want)
			}
		}
	}
}

// TestABI_RepeatInsideAnOpaqueValueIsCarried: a value the fold carries as
// recorded (input, output, choice, an answer…) may repeat a name inside; it
// is read as event.Canonical and JSON.parse read it, the last one winning,
// and is not malformed.
func TestABI_RepeatInsideAnOpaqueValueIsCarried(t *testing.T) {
	s := newLog().started().
		add(event.StepStarted, `{"stepId":"s","input":{"x":1,"x":2}}`).
		add(event.DecisionRecorded, `{"decisionId":"d","choice":{"k":"a","k":"b"}}`).
		add(event.ExecutionSuspended, `{"on":"g"}`).
		add(event.ExecutionResumed, `{"eventType":"g","payload":{"ok":false,"ok":true}}`).fold()
	if got := string(s.Frames["s"].Input); got != `{"x":1,"x":2}` {
		t.Fatalf("frame input = %s, want the recorded bytes", got)
	}
	enc := mustEncode(t, s)
	for _, want := range []string{`"input":{"x":2}`, `"choice":{"k":"b"}`, `"payload":{"ok":true}`} {
		if !strings.Contains(enc, want) {
			t.Errorf("canonical state lacks %s: %s", want, enc)
		}
	}
}

// TestDecodeSnapshotIsExact: a snapshot is the kernel's own format, decoded
// with exact names and no unknown or repeated fields.
func TestDecodeSnapshotIsExact(t *testing.T) {
	s := newLog().started().add(event.StepStarted, `{"stepId":"s","input":{"x":1,"x":2}}`).fold()
	raw, err := EncodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(raw)
	if err != nil || string(back.Frames["s"].Input) != `{"x":1,"x":2}` {
		t.Fatalf("Decode(EncodeSnapshot) = %s, %v: a repeat inside a carried value must round-trip", back.Frames["s"].Input, err)
	}
	const tail = `"frames":{},"variables":{},"sequence":0,"startedAt":0,"updatedAt":0}`
	for _, in := range []string{
		`{"Status":"running",` + tail,
		`{"status":"running","status":"failed",` + tail,
		`{"status":"running","frames":{},"variables":{"_Input":1},"sequence":0,"startedAt":0,"updatedAt":0}`,
		`{"status":"running","frames":{"a":{"stepId":"a","status":"running","attempt":1,"seq":0},"a":{"stepId":"a","status":"failed","attempt":1,"seq":0}},"variables":{},"sequence":0,"startedAt":0,"updatedAt":0}`,
		`{"status":"running\ud800",` + tail,
		"{\"status\":\"running\xff\"," + tail,
		`{"status":"running",` + tail + ` {}`,
	} {
		if _, err := Decode([]byte(in)); !errors.Is(err, ErrInvalidState) || !errors.Is(err, event.ErrInexactJSON) {
			t.Errorf("Decode(%s) = %v, want ErrInvalidState and event.ErrInexactJSON", in, err)
		}
	}
}

// TestABI_ResumeWithABareAnswer: well-formed JSON that is not the resume
// wrapper is the answer itself, with no eventType — however its wrapper
// members are ordered.
func TestABI_ResumeWithABareAnswer(t *testing.T) {
	for _, p := range []string{`[1,2]`, `"yes"`, `true`, `3`,
		`{"eventType":5,"payload":1}`, `{"payload":1,"eventType":5}`, `{"eventType":"g","payload":1,"waitId":7}`} {
		s := newLog().started().add(event.ExecutionSuspended, `{"on":"g"}`).add(event.ExecutionResumed, p).fold()
		rp := s.Variables.ResumePayloads
		if len(rp) != 1 || rp[0].EventType != "" || string(rp[0].Payload) != p {
			t.Errorf("resume %s: %+v, want it as a bare answer", p, rp)
		}
	}
}
