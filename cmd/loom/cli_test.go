package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/wire"
)

// TestVersion: loom version, loom --version and loom version --json name
// the release and the contract versions.
func TestVersion(t *testing.T) {
	bin, _ := setup(t)
	text := mustLoom(t, bin, "version")
	if !regexp.MustCompile(`^loom \S.*\nkernel ABI \S+, wire ABI ` + regexp.QuoteMeta(wire.Version) + `, event schema \S+; go\S+ \S+/\S+\n$`).MatchString(text) {
		t.Fatalf("loom version:\n%s", text)
	}
	if flag := mustLoom(t, bin, "--version"); flag != text {
		t.Fatalf("loom --version %q differs from loom version %q", flag, text)
	}
	var v versionInfo
	decodeJSON(t, mustLoom(t, bin, "version", "--json"), &v)
	if v.Version == "" || v.WireABIVersion != wire.Version || v.KernelABIVersion == "" || v.EventSchemaVersion == "" {
		t.Fatalf("loom version --json: %+v", v)
	}
}

// TestCompletion: shell completion is on.
func TestCompletion(t *testing.T) {
	bin, _ := setup(t)
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if out := mustLoom(t, bin, "completion", shell); !strings.Contains(out, "loom") || len(out) < 200 {
			t.Errorf("loom completion %s:\n%s", shell, out)
		}
	}
	// Completion knows the commands.
	if out := mustLoom(t, bin, "__complete", "res"); !strings.Contains(out, "resume") || !strings.Contains(out, "resolve") {
		t.Fatalf("completing res: %s", out)
	}
}

// TestHelpShowsEachDefaultOnce: every flag of every command states its
// default at most once, and the environment's values (a token above all)
// never appear in help.
func TestHelpShowsEachDefaultOnce(t *testing.T) {
	t.Setenv("LOOM_TOKEN", "tok-SECRET-value")
	t.Setenv("LOOM_ADDR", "10.9.8.7:SECRET")
	t.Setenv("LOOM_STORE", "/SECRET/store.db")
	root := (&cli{}).rootCommand()
	names := []string{""}
	for _, cmd := range root.Commands() {
		names = append(names, cmd.Name())
	}
	flagLine := regexp.MustCompile(`^\s+(-\w, )?--\S+`)
	for _, name := range names {
		args := []string{"--help"}
		if name != "" {
			args = []string{name, "--help"}
		}
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != exitOK {
			t.Fatalf("loom %v: exit %d %s", args, code, errOut.String())
		}
		if strings.Contains(out.String(), "SECRET") {
			t.Errorf("loom %v shows the environment's values:\n%s", args, out.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if flagLine.MatchString(line) && strings.Count(line, "default") > 1 {
				t.Errorf("loom %v: a flag states its default twice: %q", args, line)
			}
		}
	}
}

// TestLsTenant lists one tenant's executions.
func TestLsTenant(t *testing.T) {
	bin, fx := setup(t)
	var page lsPage
	decodeJSON(t, mustLoom(t, bin, "ls", "--store", fx.path, "--json", "--tenant", "billing"), &page)
	var ids []string
	for _, e := range page.Executions {
		ids = append(ids, e.ExecutionID)
		if e.Tenant != "billing" {
			t.Fatalf("%s listed with tenant %q", e.ExecutionID, e.Tenant)
		}
	}
	if !slices.Equal(ids, []string{"refund-1", "refund-2"}) {
		t.Fatalf("--tenant billing listed %v", ids)
	}
	decodeJSON(t, mustLoom(t, bin, "ls", "--store", fx.path, "--json", "--tenant", "nobody"), &page)
	if len(page.Executions) != 0 {
		t.Fatalf("--tenant nobody listed %+v", page.Executions)
	}
}

// TestLsSort orders the listing by id, by last update or by status, and
// refuses what it cannot do.
func TestLsSort(t *testing.T) {
	bin, fx := setup(t)
	var page lsPage
	decodeJSON(t, mustLoom(t, bin, "ls", "--store", fx.path, "--json", "--sort", "updated", "--limit", "100"), &page)
	if len(page.Executions) != len(fx.ids()) || page.More != 0 {
		t.Fatalf("--sort updated listed %d (more %d)", len(page.Executions), page.More)
	}
	if !slices.IsSortedFunc(page.Executions, func(a, b inspect.Listing) int { return int(b.UpdatedAt - a.UpdatedAt) }) {
		t.Fatalf("--sort updated is not newest first: %+v", page.Executions)
	}
	decodeJSON(t, mustLoom(t, bin, "ls", "--store", fx.path, "--json", "--sort", "status", "--limit", "100"), &page)
	rank := func(s fold.Status) int { return slices.Index(statusOrder, s) }
	if !slices.IsSortedFunc(page.Executions, func(a, b inspect.Listing) int { return rank(a.Status) - rank(b.Status) }) {
		t.Fatalf("--sort status: %+v", page.Executions)
	}
	if page.Executions[0].Status != fold.StatusSuspended || page.Executions[len(page.Executions)-1].Status != fold.StatusCompleted {
		t.Fatalf("--sort status does not put the parked first and the completed last: %+v", page.Executions)
	}
	out := mustLoom(t, bin, "ls", "--store", fx.path, "--sort", "updated", "--limit", "2")
	if !strings.Contains(out, fmt.Sprintf("%d more match: raise --limit to see them", len(fx.ids())-2)) {
		t.Fatalf("ls --sort updated --limit 2:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"ls", "--store", fx.path, "--sort", "age"}, `--sort is id, updated or status, not "age"`},
		{[]string{"ls", "--store", fx.path, "--sort", "updated", "--after", "order-1"}, "--after pages in id order only"},
	} {
		if _, errOut, code := loomRun(t, bin, tc.args...); code != exitUsage || !strings.Contains(errOut, tc.says) {
			t.Errorf("loom %v: exit %d %q", tc.args, code, errOut)
		}
	}
	if out := mustLoom(t, bin, "ls", "--help"); !strings.Contains(out, "id (the default; pages with --after)") {
		t.Fatalf("ls --help does not say the default order:\n%s", out)
	}
}

// TestSequenceFlagsSayWhatASequenceIs: a sequence flag that is not a whole
// number says what a sequence is, not strconv's words.
func TestSequenceFlagsSayWhatASequenceIs(t *testing.T) {
	_, fx := setup(t)
	for _, args := range [][]string{
		{"state", "order-1", "--store", fx.path, "--at", "abc"},
		{"logs", "order-1", "--store", fx.path, "--from", "x1"},
		{"diff", "order-1", "--store", fx.path, "--from", "0", "--to", "1.5"},
		{"fork", "order-1", "--at", "last"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), "a sequence is an event's position in its execution's log: a whole number, 0 for the first event") ||
			strings.Contains(errOut.String(), "strconv") {
			t.Errorf("loom %v: exit %d %q", args, code, errOut.String())
		}
	}
}

// TestKernelDecisionsHidden: logs and state leave the kernel's own
// decisions (__loom_now#0 here) out unless --internal, and say so; --json
// keeps every event and the whole state.
func TestKernelDecisionsHidden(t *testing.T) {
	bin, fx := setup(t)
	out, errOut, code := loomRun(t, bin, "logs", "flaky-1", "--store", fx.path)
	if code != exitOK || strings.Contains(out, "__loom_now") || !strings.Contains(errOut, "(1 kernel decision(s) not shown: --internal prints them)") {
		t.Fatalf("logs: exit %d\n%s%s", code, out, errOut)
	}
	if out := mustLoom(t, bin, "logs", "flaky-1", "--store", fx.path, "--internal"); !strings.Contains(out, "DECISION_RECORDED    __loom_now#0 = ") {
		t.Fatalf("logs --internal:\n%s", out)
	}
	if out := mustLoom(t, bin, "logs", "flaky-1", "--store", fx.path, "--json"); !strings.Contains(out, `"decisionId":"__loom_now#0"`) {
		t.Fatalf("logs --json lost an event:\n%s", out)
	}
	out = mustLoom(t, bin, "state", "flaky-1", "--store", fx.path)
	if strings.Contains(out, "__loom_now") || !strings.Contains(out, "and 1 of the kernel's own (--internal lists them)") {
		t.Fatalf("state:\n%s", out)
	}
	if out := mustLoom(t, bin, "state", "flaky-1", "--store", fx.path, "--internal"); !strings.Contains(out, "Decision   __loom_now#0 = ") {
		t.Fatalf("state --internal:\n%s", out)
	}
}

// TestStepRetryingShowsErrorAndDelay: a retry's row says which attempt
// runs next, after what delay, and why the last one failed.
func TestStepRetryingShowsErrorAndDelay(t *testing.T) {
	bin, fx := setup(t)
	out := mustLoom(t, bin, "logs", "flaky-1", "--store", fx.path)
	if !strings.Contains(out, `STEP_RETRYING        flaky-step: attempt 2 in 250ms, after: "the warehouse timed out"`) {
		t.Fatalf("the retry row:\n%s", out)
	}
}

// TestJSONErrors: with --json an error is a JSON object on stdout — code,
// message, data, exitStatus — and the exit status is unchanged.
func TestJSONErrors(t *testing.T) {
	bin, fx := setup(t)
	for _, tc := range []struct {
		args []string
		code int
		data string
	}{
		{[]string{"state", "order-9", "--store", fx.path, "--json"}, exitNotFound, `{"executionId":"order-9"}`},
		{[]string{"state", "order-1", "--store", fx.path, "--json", "--at", "999"}, exitNotFound, `"last":`},
		{[]string{"ls", "--store", fx.path, "--json", "--limit", "0"}, exitUsage, ""},
		{[]string{"ls", "--json", "--bogus"}, exitUsage, ""},
		{[]string{"state", "order-1", "--json", "--at", "abc", "--store", fx.path}, exitUsage, ""},
	} {
		out, errOut, code := loomRun(t, bin, tc.args...)
		var je jsonError
		if err := json.Unmarshal([]byte(out), &je); err != nil {
			t.Errorf("loom %v: stdout is not a JSON error: %v\n%s", tc.args, err, out)
			continue
		}
		var data bytes.Buffer
		if len(je.Data) > 0 {
			_ = json.Compact(&data, je.Data)
		}
		if code != tc.code || je.Code != tc.code || je.ExitStatus != tc.code || je.Message == "" ||
			!strings.Contains(errOut, je.Message) || !strings.Contains(data.String(), tc.data) {
			t.Errorf("loom %v: exit %d, %+v (data %s)", tc.args, code, je, je.Data)
		}
	}
}

// TestExplainWire: the CLI prints the structured detail of the app's
// refusals readably.
func TestExplainWire(t *testing.T) {
	data := func(v map[string]any) json.RawMessage { b, _ := json.Marshal(v); return b }
	for _, tc := range []struct {
		err  *wire.Error
		says []string
	}{
		{&wire.Error{Code: wire.CodePayloadInvalid, Message: `the resume payload does not satisfy the schema of gate "approve" at /approved: got string, want boolean`,
			Data: data(map[string]any{"executionId": "o-1", "gate": "approve", "violations": []map[string]string{
				{"pointer": "/approved", "keyword": "properties/approved/type", "message": "got string, want boolean"},
				{"pointer": "/note", "keyword": "properties/note/pattern", "message": "does not match the pattern the schema requires"}}})},
			[]string{"at /approved (properties/approved/type): got string, want boolean", "at /note (properties/note/pattern): does not match",
				"loom gate o-1 shows the schema the answer must satisfy"}},
		{&wire.Error{Code: wire.CodeBusy, Message: "busy", Data: data(map[string]any{"executionId": "o-1", "owner": "node-7", "expiresAt": 1767225630000})},
			[]string{"execution o-1 is driven by node node-7", "retry after 2026-01-01T00:00:30.000Z"}},
		{&wire.Error{Code: wire.CodeBusy, Message: "busy", Data: data(map[string]any{"executionId": "o-1", "expiresAt": 1767225630000})},
			[]string{"has not taken its lease yet", "retry after 2026-01-01T00:00:30.000Z"}},
		{&wire.Error{Code: wire.CodeFlowCodeMismatch, Message: "recorded under another code", Data: data(map[string]any{"recorded": "v1", "registered": "v2"})},
			[]string{"recorded code:   v1", "registered code: v2"}},
		{&wire.Error{Code: wire.CodeNotConfigured, Message: "not configured", Data: data(map[string]any{"field": "Timers", "need": "a timed wait"})},
			[]string{"the app must set Config.Timers (a timed wait)"}},
	} {
		code, msg := classify(tc.err)
		for _, want := range tc.says {
			if !strings.Contains(msg, want) {
				t.Errorf("code %d: %q lacks %q", tc.err.Code, msg, want)
			}
		}
		if code != exitRefused && code != exitUnsupported {
			t.Errorf("code %d: exit %d", tc.err.Code, code)
		}
	}
}

// TestPrintGateKinds: loom gate's text for each kind of park — a select's
// every wait with the schema of its gate, a sleep, a diverged replay — and
// for an execution that is not parked.
func TestPrintGateKinds(t *testing.T) {
	wake, timeout := int64(1767225600000), int64(3_600_000)
	for _, tc := range []struct {
		g    wire.GateResult
		says []string
	}{
		{wire.GateResult{ExecutionID: "e-1", FlowID: "either", Status: fold.StatusSuspended, Sequence: 4, Gate: &wire.Gate{
			On: "__loom_select__", Kind: wire.GateSelect, Since: 4, Waits: []wire.Wait{
				{WaitID: "w0", Kind: "gate", On: "sign", Schema: json.RawMessage(`{"type":"boolean"}`)},
				{WaitID: "w1", Kind: "message", Topic: "news"},
				{WaitID: "w2", Kind: "timer", WakeAt: &wake}}}},
			[]string{"a select of 3 waits, since #4", "Wait 1     gate sign: loom resume e-1 --event sign --payload JSON",
				"Wait 2     a message on topic news", "Wait 3     a timer at 2026-01-01T00:00:00.000Z",
				"The answer to sign must satisfy this JSON Schema:\n{\n  \"type\": \"boolean\"\n}"}},
		{wire.GateResult{ExecutionID: "s-1", Status: fold.StatusSuspended, Gate: &wire.Gate{On: "__loom_sleep__", Kind: wire.GateSleep, Since: 2,
			WakeAt: &wake, TimeoutMs: &timeout}},
			[]string{"asleep since #2; its timer answers it", "Times out  2026-01-01T00:00:00.000Z", "1h0m0s after it parked"}},
		{wire.GateResult{ExecutionID: "d-1", Status: fold.StatusSuspended, Gate: &wire.Gate{On: fold.GateDiverged, Kind: wire.GateDiverged, Since: 9}},
			[]string{"a replay diverged from the log", "loom resume d-1 --event __loom_diverged__"}},
		{wire.GateResult{ExecutionID: "n-1", Status: fold.StatusCompleted, Sequence: 12},
			[]string{"n-1 (): completed at #12", "none: it is not parked"}},
		{wire.GateResult{ExecutionID: "g-1", Status: fold.StatusSuspended, Gate: &wire.Gate{On: "approve", Kind: wire.GateNamed, Since: 3}},
			[]string{"The flow declares no schema for approve: any JSON answers it."}},
	} {
		var out bytes.Buffer
		c := &cli{stdout: &out}
		if err := c.printGate(tc.g, true); err != nil {
			t.Fatal(err)
		}
		for _, want := range tc.says {
			if !strings.Contains(out.String(), want) {
				t.Errorf("gate %s: no %q in\n%s", tc.g.ExecutionID, want, out.String())
			}
		}
	}
}
