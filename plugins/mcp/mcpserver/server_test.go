package mcpserver_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/mcp/mcpserver"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInitializeNegotiates checks the SDK client initializes against the
// server and sees its name and version and a negotiated protocol version.
func TestInitializeNegotiates(t *testing.T) {
	f := newFixture(t)
	cs := f.session("tok-alice")
	init := cs.InitializeResult()
	if init == nil || init.ServerInfo == nil {
		t.Fatal("no initialize result")
	}
	if init.ServerInfo.Name != "loom-test" || init.ServerInfo.Version != "1.2.3" {
		t.Fatalf("server info %+v, want loom-test 1.2.3", init.ServerInfo)
	}
	if init.ProtocolVersion == "" || init.Capabilities == nil || init.Capabilities.Tools == nil {
		t.Fatalf("initialize result %+v: want a protocol version and the tools capability", init)
	}
}

// TestListIsAudienceScoped checks alice (admins) sees admin.report, bob
// does not and cannot call it, and nothing started.
func TestListIsAudienceScoped(t *testing.T) {
	f := newFixture(t)
	names := func(cs *sdk.ClientSession) []string {
		res, err := cs.ListTools(f.ctx(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range res.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	alice, bob := f.session("tok-alice"), f.session("tok-bob")
	if got, want := names(alice), []string{"admin.report", "approve", "boom", "echo", "greet", "resume"}; !equalSorted(got, want) {
		t.Fatalf("alice sees %v, want %v", got, want)
	}
	if got, want := names(bob), []string{"approve", "boom", "echo", "greet", "resume"}; !equalSorted(got, want) {
		t.Fatalf("bob sees %v, want %v", got, want)
	}
	if _, err := bob.CallTool(f.ctx(), &sdk.CallToolParams{Name: "admin.report", Arguments: map[string]any{}}); err == nil {
		t.Fatal("bob called admin.report")
	}
	if n := f.executions(); n != 0 {
		t.Fatalf("%d executions after a refused call, want 0", n)
	}
	if o, isErr := f.call(alice, "admin.report", map[string]any{}); isErr || string(o.Output) != `"secret report"` {
		t.Fatalf("alice's admin.report: %+v (isError %v)", o, isErr)
	}
}

func equalSorted(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestCallCompletes checks a flow that completes answers its output, and
// records the caller as the execution's principal.
func TestCallCompletes(t *testing.T) {
	f := newFixture(t)
	o, isErr := f.call(f.session("tok-alice"), "greet", map[string]any{"name": "Ada"})
	if isErr || o.Status != "completed" || string(o.Output) != `{"greeting":"hello Ada"}` {
		t.Fatalf("greet: %+v (isError %v)", o, isErr)
	}
	st, err := f.rt.LoadState(f.ctx(), o.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if string(st.Variables.Principal) != `{"id":"alice"}` {
		t.Fatalf("recorded principal %s, want alice", st.Variables.Principal)
	}
}

// TestCallFails checks a failing flow answers isError with its message.
func TestCallFails(t *testing.T) {
	f := newFixture(t)
	o, isErr := f.call(f.session("tok-bob"), "boom", nil)
	if !isErr || o.Status != "failed" || !strings.Contains(o.Error, "boom") || o.ExecutionID == "" {
		t.Fatalf("boom: %+v (isError %v)", o, isErr)
	}
}

// TestEffectFlowRunsTheEffect checks an effect exposed through EffectFlow
// runs once and answers its output.
func TestEffectFlowRunsTheEffect(t *testing.T) {
	f := newFixture(t)
	o, isErr := f.call(f.session("tok-bob"), "echo", map[string]any{"say": "hi"})
	if isErr || o.Status != "completed" || string(o.Output) != `{"say":"hi"}` {
		t.Fatalf("echo: %+v (isError %v)", o, isErr)
	}
	if n := f.echoes.Load(); n != 1 {
		t.Fatalf("echo ran %d times, want 1", n)
	}
}

// TestParkThenResume checks a parking flow answers its execution and gate
// with the gate's schema, a payload the schema refuses is an isError
// naming the violations with nothing appended, and the right payload
// completes it.
func TestParkThenResume(t *testing.T) {
	f := newFixture(t)
	alice := f.session("tok-alice")
	o, isErr := f.call(alice, "approve", map[string]any{"name": "deploy"})
	if isErr || o.Status != "suspended" || o.Gate == nil || o.Gate.On != "approval" {
		t.Fatalf("approve: %+v (isError %v)", o, isErr)
	}
	if string(o.Gate.Schema) != approvalSchema {
		t.Fatalf("gate schema %s, want %s", o.Gate.Schema, approvalSchema)
	}
	id := o.ExecutionID
	before := f.events(id)

	bad, isErr := f.call(alice, "resume", map[string]any{"executionId": id, "gate": "approval", "payload": map[string]any{"approved": "yes"}})
	if !isErr || bad.Status != "refused" || bad.Refusal != "invalid-payload" || len(bad.Violations) == 0 {
		t.Fatalf("resume with a bad payload: %+v (isError %v)", bad, isErr)
	}
	wrongGate, isErr := f.call(alice, "resume", map[string]any{"executionId": id, "gate": "other", "payload": map[string]any{}})
	if !isErr || wrongGate.Refusal != string(loom.RefusedGateMismatch) {
		t.Fatalf("resume of another gate: %+v (isError %v)", wrongGate, isErr)
	}
	if after := f.events(id); after != before {
		t.Fatalf("refused resumes appended %d events", after-before)
	}

	done, isErr := f.call(alice, "resume", map[string]any{"executionId": id, "gate": "approval", "payload": map[string]any{"approved": true}})
	if isErr || done.Status != "completed" || done.ExecutionID != id {
		t.Fatalf("resume: %+v (isError %v)", done, isErr)
	}
	var out map[string]any
	if err := json.Unmarshal(done.Output, &out); err != nil || out["approved"] != true || out["name"] != "deploy" {
		t.Fatalf("output %s (%v)", done.Output, err)
	}
}

// TestResumeOfAnotherCallersExecution checks bob cannot resume alice's
// execution: he is told what a missing id tells him, nothing is appended,
// and alice's execution stays parked.
func TestResumeOfAnotherCallersExecution(t *testing.T) {
	f := newFixture(t)
	o, _ := f.call(f.session("tok-alice"), "approve", map[string]any{"name": "deploy"})
	if o.Status != "suspended" {
		t.Fatalf("approve: %+v", o)
	}
	before := f.events(o.ExecutionID)
	for _, token := range []string{"tok-bob", "tok-alice-t2"} {
		other := f.session(token)
		stolen, isErr := f.call(other, "resume", map[string]any{"executionId": o.ExecutionID, "gate": "approval", "payload": map[string]any{"approved": true}})
		missing, _ := f.call(other, "resume", map[string]any{"executionId": "no-such-execution", "gate": "approval", "payload": map[string]any{"approved": true}})
		if !isErr || stolen.Error != mcpserver.ErrExecutionNotFound.Error() || stolen.Error != missing.Error || stolen.Refusal != missing.Refusal {
			t.Fatalf("%s's resume of alice's execution: %+v, of a missing one: %+v", token, stolen, missing)
		}
		if after := f.events(o.ExecutionID); after != before {
			t.Fatalf("%s's resume appended %d events", token, after-before)
		}
	}
	st, err := f.rt.LoadState(f.ctx(), o.ExecutionID)
	if err != nil || st.Status != "suspended" {
		t.Fatalf("alice's execution: %s (%v), want suspended", st.Status, err)
	}
}

// TestResumeOfAnUnexposedFlow checks an execution alice started outside
// MCP, of a flow no tool exposes, is not found through resume, nothing
// appended.
func TestResumeOfAnUnexposedFlow(t *testing.T) {
	f := newFixture(t)
	ctx := loom.WithPrincipal(f.ctx(), loom.Principal{ID: "alice"})
	id, err := f.rt.Start(ctx, "hidden", greetIn{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	before := f.events(id)
	o, isErr := f.call(f.session("tok-alice"), "resume", map[string]any{"executionId": id, "gate": "approval", "payload": map[string]any{"approved": true}})
	if !isErr || o.Error != mcpserver.ErrExecutionNotFound.Error() {
		t.Fatalf("resume of an unexposed flow: %+v (isError %v)", o, isErr)
	}
	if after := f.events(id); after != before {
		t.Fatalf("the refused resume appended %d events", after-before)
	}
}

// TestResumeArgumentsRefused checks resume refuses malformed arguments as
// *ArgumentsError text, nothing appended.
func TestResumeArgumentsRefused(t *testing.T) {
	f := newFixture(t)
	alice := f.session("tok-alice")
	o, _ := f.call(alice, "approve", map[string]any{"name": "x"})
	before := f.events(o.ExecutionID)
	for _, args := range []map[string]any{
		{"gate": "approval"},
		{"executionId": o.ExecutionID, "gate": "approval", "extra": 1},
	} {
		r, isErr := f.call(alice, "resume", args)
		if !isErr || !strings.Contains(r.Error, "invalid arguments") {
			t.Fatalf("resume %v: %+v (isError %v)", args, r, isErr)
		}
	}
	if after := f.events(o.ExecutionID); after != before {
		t.Fatalf("refused resumes appended %d events", after-before)
	}
}

// TestCallArgumentsRefused checks arguments that are not an object, or
// that the flow's input type cannot take, start nothing.
func TestCallArgumentsRefused(t *testing.T) {
	f := newFixture(t)
	bob := f.session("tok-bob")
	o, isErr := f.call(bob, "greet", "not an object")
	if want := (&mcpserver.ArgumentsError{Tool: "greet", Detail: "the arguments must be a JSON object"}).Error(); !isErr || o.Error != want {
		t.Fatalf("greet with a string: %+v, want %q", o, want)
	}
	o, isErr = f.call(bob, "greet", map[string]any{"name": 5})
	if !isErr || o.Status != "refused" || o.ExecutionID != "" {
		t.Fatalf("greet with a number for a name: %+v (isError %v)", o, isErr)
	}
	if n := f.executions(); n != 0 {
		t.Fatalf("%d executions after refused calls, want 0", n)
	}
}

// TestAuthorizeDenies checks a call Authorize refuses starts nothing.
func TestAuthorizeDenies(t *testing.T) {
	f := newFixture(t)
	carol := f.session("tok-carol")
	o, isErr := f.call(carol, "greet", map[string]any{"name": "x"})
	want := (&mcpserver.ToolDeniedError{Tool: "greet"}).Error()
	if !isErr || o.Error != want || o.ExecutionID != "" {
		t.Fatalf("carol's greet: %+v (isError %v), want %q", o, isErr, want)
	}
	if n := f.executions(); n != 0 {
		t.Fatalf("%d executions after a denied call, want 0", n)
	}
	o, _ = f.call(f.session("tok-alice"), "approve", map[string]any{"name": "x"})
	before := f.events(o.ExecutionID)
	r, isErr := f.call(carol, "resume", map[string]any{"executionId": o.ExecutionID, "gate": "approval", "payload": map[string]any{"approved": true}})
	if want := (&mcpserver.ToolDeniedError{Tool: "resume"}).Error(); !isErr || r.Error != want {
		t.Fatalf("carol's resume: %+v, want %q", r, want)
	}
	if after := f.events(o.ExecutionID); after != before {
		t.Fatalf("the denied resume appended %d events", after-before)
	}
}

// TestUnauthenticatedIs401 checks a request without (or with unknown)
// credentials is 401 with WWW-Authenticate before anything runs, and the
// SDK client cannot connect.
func TestUnauthenticatedIs401(t *testing.T) {
	f := newFixture(t)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"x"}}}`
	for _, token := range []string{"", "tok-nobody"} {
		req, err := http.NewRequestWithContext(f.ctx(), http.MethodPost, f.url, strings.NewReader(call))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("token %q: %d %q (WWW-Authenticate %q), want 401", token, resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if _, err := connect(f.ctx(), f.url, "tok-nobody"); err == nil {
		t.Fatal("the SDK client connected without valid credentials")
	}
	if n := f.executions(); n != 0 {
		t.Fatalf("%d executions after unauthenticated requests, want 0", n)
	}
}

// TestWellKnownIs404 checks OAuth discovery probes get 404, not 401,
// without credentials.
func TestWellKnownIs404(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(f.url + p)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("WWW-Authenticate") != "" {
			t.Fatalf("%s: %d, want 404 without a challenge", p, resp.StatusCode)
		}
	}
}

// TestNewRefusesInsecure checks New wants Authenticate and Authorize or an
// explicit Insecure.
func TestNewRefusesInsecure(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		opts    mcpserver.Options
		missing []string
	}{
		{mcpserver.Options{}, []string{"Authenticate", "Authorize"}},
		{mcpserver.Options{Authenticate: authenticate}, []string{"Authorize"}},
		{mcpserver.Options{Authorize: authorize}, []string{"Authenticate"}},
	}
	for _, c := range cases {
		_, err := mcpserver.New(f.rt, c.opts)
		var ice *mcpserver.InsecureConfigError
		if !errors.As(err, &ice) || !slices.Equal(ice.Missing, c.missing) {
			t.Fatalf("New(%+v): %v, want InsecureConfigError missing %v", c.opts, err, c.missing)
		}
	}
	if _, err := mcpserver.New(f.rt, mcpserver.Options{Insecure: true}); err != nil {
		t.Fatalf("New(Insecure): %v", err)
	}
}

// TestNewRefusesBadTools checks each bad tool declaration is refused.
func TestNewRefusesBadTools(t *testing.T) {
	f := newFixture(t)
	cases := map[string][]mcpserver.FlowTool{
		"unknown flow": {{Name: "x", FlowID: "nope"}},
		"duplicate":    {{Name: "x", FlowID: "greet"}, {Name: "x", FlowID: "boom"}},
		"reserved":     {{Name: "resume", FlowID: "greet"}},
		"invalid name": {{Name: "two words", FlowID: "greet"}},
		"empty name":   {{Name: "", FlowID: "greet"}},
		"long name":    {{Name: strings.Repeat("a", mcpserver.MaxToolNameLength+1), FlowID: "greet"}},
		"bad schema":   {{Name: "x", FlowID: "greet", InputSchema: json.RawMessage(`{"type":"string"}`)}},
		"not json":     {{Name: "x", FlowID: "greet", InputSchema: json.RawMessage(`{`)}},
	}
	for name, ts := range cases {
		_, err := mcpserver.New(f.rt, mcpserver.Options{Insecure: true, Tools: ts})
		var tce *mcpserver.ToolConfigError
		if !errors.As(err, &tce) {
			t.Fatalf("%s: %v, want *ToolConfigError", name, err)
		}
		if name == "unknown flow" && !errors.Is(err, loom.ErrUnknownFlow) {
			t.Fatalf("%s: %v, want it to wrap loom.ErrUnknownFlow", name, err)
		}
	}
}
