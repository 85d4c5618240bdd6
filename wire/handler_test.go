package wire_test

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// TestHandshakeRaw pins the handshake's field names and values (spec §2:
// the wire handshake advertises kernelAbiVersion next to the syscall list).
func TestHandshakeRaw(t *testing.T) {
	e := newEnv(t, nil)
	resp := e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"loom.handshake"}`)
	if resp["jsonrpc"] != "2.0" || resp["id"].(interface{ String() string }).String() != "1" {
		t.Fatalf("envelope of the response: %v", resp)
	}
	r := result(t, resp)
	if r["wireAbiVersion"] != "1.6.0" || r["kernelAbiVersion"] != loom.KernelABIVersion || r["eventSchemaVersion"] != event.SchemaVersion {
		t.Fatalf("versions: %v", r)
	}
	var syscalls []string
	for _, s := range r["syscalls"].([]any) {
		syscalls = append(syscalls, s.(string))
	}
	if !slices.Equal(syscalls, loom.KernelSyscalls) {
		t.Fatalf("syscalls %v, want loom.KernelSyscalls %v", syscalls, loom.KernelSyscalls)
	}
	var methods []string
	for _, m := range r["methods"].([]any) {
		methods = append(methods, m.(string))
	}
	want := []string{"loom.handshake", "execution.start", "execution.resume", "execution.cancel", "execution.fork",
		"execution.state", "execution.events", "execution.subscribe", "execution.resolve", "execution.gate", "execution.watch",
		"readmodel.query", "readmodel.watch", "execution.send", "execution.resumeAs", "runtime.recover", "execution.list",
		"execution.checkReplay"}
	if !slices.Equal(methods, want) {
		t.Fatalf("methods %v, want %v", methods, want)
	}
	// The registered flows, by id, with each gate's schema.
	flows := r["flows"].([]any)
	if len(flows) != 2 || flows[0].(map[string]any)["id"] != "blocker" || flows[1].(map[string]any)["id"] != "order" {
		t.Fatalf("flows %v", flows)
	}
	schemas := flows[1].(map[string]any)["resumeSchemas"].(map[string]any)
	if gate := schemas["approve"].(map[string]any); gate["required"].([]any)[0] != "approved" {
		t.Fatalf("the approve gate's schema: %v", schemas)
	}
	if r["maxRequestBytes"].(interface{ String() string }).String() != "1048576" {
		t.Fatalf("maxRequestBytes %v", r["maxRequestBytes"])
	}
}

// TestLifecycleRaw drives an execution through start, refused and accepted
// resumes, state at a sequence and paged events, with raw JSON bodies: the
// method names and the param and result field names are the wire format.
func TestLifecycleRaw(t *testing.T) {
	e := newEnv(t, nil)
	r := result(t, e.rpc(t, `{"jsonrpc":"2.0","id":"s1","method":"execution.start",
		"params":{"flowId":"order","input":{"item":"tea","qty":3},"executionId":"o-1","wait":true}}`))
	if r["executionId"] != "o-1" {
		t.Fatalf("start result %v", r)
	}
	st := stateOf(t, r)
	if st["status"] != "suspended" || st["variables"].(map[string]any)["_suspendedOn"].(map[string]any)["on"] != "approve" {
		t.Fatalf("after start: %v", st)
	}
	if p := st["variables"].(map[string]any)["_principal"].(map[string]any); p["user"] != "ann" {
		t.Fatalf("EXECUTION_STARTED did not record the wire principal: %v", p)
	}
	parkedAt := eventCount(t, e, "o-1")

	for _, tc := range []struct {
		name, params string
		code         int
	}{
		{"kernel type", `{"executionId":"o-1","eventType":"STEP_COMPLETED","payload":{}}`, wire.CodeKernelEventType},
		{"another gate", `{"executionId":"o-1","eventType":"ship-now","payload":{}}`, wire.CodeGateMismatch},
		{"off schema", `{"executionId":"o-1","eventType":"approve","payload":{"approved":"yes"}}`, wire.CodePayloadInvalid},
		{"unknown execution", `{"executionId":"o-404","eventType":"approve","payload":{"approved":true}}`, wire.CodeExecutionNotFound},
		{"control character id", `{"executionId":"o\u0001","eventType":"approve"}`, wire.CodeInvalidInput},
		{"missing eventType", `{"executionId":"o-1"}`, wire.CodeInvalidParams},
		{"misspelled field", `{"executionID":"o-1","eventType":"approve"}`, wire.CodeInvalidParams},
	} {
		resp := e.rpc(t, `{"jsonrpc":"2.0","id":7,"method":"execution.resume","params":`+tc.params+`}`)
		if got := errCode(t, resp); got != tc.code {
			t.Errorf("%s: code %d, want %d (%v)", tc.name, got, tc.code, resp["error"])
		}
		if resp["id"].(interface{ String() string }).String() != "7" {
			t.Errorf("%s: the error response lost the id: %v", tc.name, resp)
		}
	}
	if n := eventCount(t, e, "o-1"); n != parkedAt {
		t.Fatalf("refused resumes appended events: %d → %d", parkedAt, n)
	}
	bad := e.rpc(t, `{"jsonrpc":"2.0","id":8,"method":"execution.resume","params":{"executionId":"o-1","eventType":"approve","payload":{"approved":true,"note":"NO!"}}}`)
	if d := bad["error"].(map[string]any)["data"].(map[string]any); d["gate"] != "approve" || d["location"] != "/note" {
		t.Fatalf("schema refusal data: %v", d)
	}

	r = result(t, e.rpc(t, `{"jsonrpc":"2.0","id":9,"method":"execution.resume",
		"params":{"executionId":"o-1","eventType":"approve","payload":{"approved":true,"note":"ok"},"wait":true}}`))
	if st := stateOf(t, r); st["status"] != "completed" {
		t.Fatalf("after resume: %v", st)
	}
	approvals := stateOf(t, r)["variables"].(map[string]any)["_approvals"].([]any)
	if a := approvals[0].(map[string]any); a["gate"] != "approve" || a["principal"].(map[string]any)["user"] != "ann" {
		t.Fatalf("APPROVAL_GRANTED did not record the wire principal: %v", approvals)
	}

	at0 := result(t, e.rpc(t, `{"jsonrpc":"2.0","id":10,"method":"execution.state","params":{"executionId":"o-1","at":0}}`))
	if st := stateOf(t, at0); st["status"] != "running" || st["sequence"].(interface{ String() string }).String() != "0" {
		t.Fatalf("state at 0: %v", st)
	}
	past := e.rpc(t, `{"jsonrpc":"2.0","id":11,"method":"execution.state","params":{"executionId":"o-1","at":999}}`)
	if errCode(t, past) != wire.CodeSequenceOutOfRange {
		t.Fatalf("state past the end: %v", past)
	}

	total := eventCount(t, e, "o-1")
	page := result(t, e.rpc(t, `{"jsonrpc":"2.0","id":12,"method":"execution.events","params":{"executionId":"o-1","from":1,"limit":3}}`))
	evs := page["events"].([]any)
	if len(evs) != 3 || page["next"].(interface{ String() string }).String() != "4" {
		t.Fatalf("page 1..3: %d events, next %v", len(evs), page["next"])
	}
	first := evs[0].(map[string]any)
	for _, k := range []string{"id", "workflowId", "executionId", "eventType", "sequence", "timestamp", "payload"} {
		if _, ok := first[k]; !ok {
			t.Fatalf("envelope without %q: %v", k, first)
		}
	}
	last := result(t, e.rpc(t, `{"jsonrpc":"2.0","id":13,"method":"execution.events","params":{"executionId":"o-1","from":`+itoa(total-1)+`}}`))
	if len(last["events"].([]any)) != 1 || last["next"] != nil {
		t.Fatalf("last page: %v", last)
	}
}

// TestErrorsEchoNoSecrets sends a payload and credentials holding marker
// strings through refusals: no message or data may carry them back.
func TestErrorsEchoNoSecrets(t *testing.T) {
	e := newEnv(t, nil)
	e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"o-s","wait":true}}`)
	for _, params := range []string{
		`{"executionId":"o-s","eventType":"approve","payload":{"approved":true,"note":"PAYLOAD-SECRET-42"},"credentials":{"key":"CRED-SECRET-7"}}`,
		`{"executionId":"o-s","eventType":"approve","payload":{"approved":"PAYLOAD-SECRET-42"},"credentials":"CRED-SECRET-7"}`,
		`{"executionId":"o-s","eventType":"other","payload":"PAYLOAD-SECRET-42","credentials":"CRED-SECRET-7"}`,
	} {
		_, out := e.post(t, `{"jsonrpc":"2.0","id":2,"method":"execution.resume","params":`+params+`}`)
		if !strings.Contains(out, `"error"`) || strings.Contains(out, "SECRET") {
			t.Errorf("refusal echoes a secret or is not an error: %s", out)
		}
	}
}

// TestAuthenticationRequired: the wire is authenticated by default.
func TestAuthenticationRequired(t *testing.T) {
	_, err := wire.Handler(newRuntime(t), wire.Options{Events: memstore.NewEventStore()})
	var oe *wire.OptionsError
	if !errors.As(err, &oe) || oe.Field != "Authenticate" || !errors.Is(err, wire.ErrInvalidOptions) {
		t.Fatalf("a handler without Authenticate: %v", err)
	}
	if _, err := wire.Handler(newRuntime(t), wire.Options{Authenticate: wire.BearerToken("t", nil)}); !errors.Is(err, wire.ErrInvalidOptions) {
		t.Fatalf("a handler without Events: %v", err)
	}
	if _, err := wire.Handler(newRuntime(t), wire.Options{Events: memstore.NewEventStore(), Insecure: true}); err != nil {
		t.Fatalf("an explicitly insecure handler: %v", err)
	}

	e := newEnv(t, nil)
	for _, tok := range []string{"", "wrong", token + "x"} {
		status, out := e.postAs(t, tok, `{"jsonrpc":"2.0","id":1,"method":"loom.handshake"}`)
		if status != http.StatusUnauthorized || errCode(t, decode(t, out)) != wire.CodeUnauthenticated {
			t.Errorf("token %q: HTTP %d %s", tok, status, out)
		}
	}
	if p := e.authz.principals(); len(p) != 0 {
		t.Fatalf("unauthenticated requests reached the runtime: %v", p)
	}
}

// TestPrincipalReachesAuthorizer: Authenticate's principal is what the
// runtime's Authorizer sees, and its denial maps to CodeDenied.
func TestPrincipalReachesAuthorizer(t *testing.T) {
	e := newEnv(t, nil)
	e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"locked","wait":true}}`)
	resp := e.rpc(t, `{"jsonrpc":"2.0","id":2,"method":"execution.cancel","params":{"executionId":"locked","reason":"stop"}}`)
	if errCode(t, resp) != wire.CodeDenied {
		t.Fatalf("cancel of locked: %v", resp)
	}
	if msg := resp["error"].(map[string]any)["message"].(string); strings.Contains(msg, "cannot be cancelled") {
		t.Fatalf("the authorizer's words reached the caller: %q", msg)
	}
	seen := e.authz.principals()
	if len(seen) == 0 {
		t.Fatal("the authorizer saw no request")
	}
	for _, p := range seen {
		if m, ok := p.(map[string]any); !ok || m["user"] != "ann" {
			t.Fatalf("the authorizer saw principal %v, want ann", p)
		}
	}
	r := result(t, e.rpc(t, `{"jsonrpc":"2.0","id":3,"method":"execution.start","params":{"flowId":"order","input":{"item":"y","qty":1},"executionId":"free","wait":true}}`))
	if r["executionId"] != "free" {
		t.Fatal(r)
	}
	if r := result(t, e.rpc(t, `{"jsonrpc":"2.0","id":4,"method":"execution.cancel","params":{"executionId":"free","reason":"stop"}}`)); r["executionId"] != "free" {
		t.Fatal(r)
	}
	again := e.rpc(t, `{"jsonrpc":"2.0","id":5,"method":"execution.cancel","params":{"executionId":"free"}}`)
	if errCode(t, again) != wire.CodeTerminal {
		t.Fatalf("a second cancel: %v", again)
	}
}

// TestProtocolErrors covers the standard JSON-RPC codes, notifications,
// batches and the body cap.
func TestProtocolErrors(t *testing.T) {
	e := newEnv(t, func(o *wire.Options) { o.MaxRequestBytes = 512 })
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"not JSON", `{"jsonrpc":`, wire.CodeParseError},
		{"no jsonrpc", `{"id":1,"method":"loom.handshake"}`, wire.CodeInvalidRequest},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"loom.handshake"}`, wire.CodeInvalidRequest},
		{"unknown member", `{"jsonrpc":"2.0","id":1,"method":"loom.handshake","extra":1}`, wire.CodeInvalidRequest},
		{"no method", `{"jsonrpc":"2.0","id":1,"method":"execution.explode"}`, wire.CodeMethodNotFound},
		{"positional params", `{"jsonrpc":"2.0","id":1,"method":"execution.state","params":["o-1"]}`, wire.CodeInvalidParams},
		{"mistyped param", `{"jsonrpc":"2.0","id":1,"method":"execution.events","params":{"executionId":"x","from":"0"}}`, wire.CodeInvalidParams},
		{"empty batch", `[]`, wire.CodeInvalidRequest},
		{"unknown flow", `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"nope"}}`, wire.CodeUnknownFlow},
		{"fork past the end", `{"jsonrpc":"2.0","id":1,"method":"execution.fork","params":{"executionId":"nope","at":1}}`, wire.CodeExecutionNotFound},
	} {
		status, out := e.post(t, tc.body)
		if status != http.StatusOK {
			t.Errorf("%s: HTTP %d", tc.name, status)
			continue
		}
		if got := errCode(t, decode(t, out)); got != tc.code {
			t.Errorf("%s: code %d, want %d: %s", tc.name, got, tc.code, out)
		}
	}
	status, out := e.post(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":"`+strings.Repeat("x", 600)+`"}}`)
	if status != http.StatusRequestEntityTooLarge || errCode(t, decode(t, out)) != wire.CodeRequestTooLarge {
		t.Fatalf("over the cap: HTTP %d %s", status, out)
	}
	if status, out := e.post(t, `{"jsonrpc":"2.0","method":"loom.handshake"}`); status != http.StatusNoContent || out != "" {
		t.Fatalf("a notification got HTTP %d %q", status, out)
	}
	status, out = e.post(t, `[{"jsonrpc":"2.0","id":1,"method":"loom.handshake"},{"jsonrpc":"2.0","method":"loom.handshake"},{"jsonrpc":"2.0","id":2,"method":"nope"}]`)
	if status != http.StatusOK || !strings.HasPrefix(out, "[") || strings.Count(out, `"jsonrpc"`) != 2 || !strings.Contains(out, "-32601") {
		t.Fatalf("batch: HTTP %d %s", status, out)
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+wire.Path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: HTTP %d", resp.StatusCode)
	}
}

// TestForkRaw forks a parked execution into a simulation and answers it.
func TestForkRaw(t *testing.T) {
	e := newEnv(t, nil)
	st := stateOf(t, result(t, e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":2},"executionId":"p","wait":true}}`)))
	at := st["sequence"].(interface{ String() string }).String()
	past := e.rpc(t, `{"jsonrpc":"2.0","id":2,"method":"execution.fork","params":{"executionId":"p","at":99}}`)
	if errCode(t, past) != wire.CodeSequenceOutOfRange {
		t.Fatalf("fork past the end: %v", past)
	}
	r := result(t, e.rpc(t, `{"jsonrpc":"2.0","id":3,"method":"execution.fork","params":{"executionId":"p","at":`+at+`,"forkId":"p-sim","simulate":true,"wait":true}}`))
	if r["executionId"] != "p-sim" || stateOf(t, r)["status"] != "suspended" {
		t.Fatalf("fork: %v", r)
	}
	if chain := stateOf(t, r)["variables"].(map[string]any)["_forkChain"].([]any); chain[0].(map[string]any)["executionId"] != "p" {
		t.Fatalf("fork chain %v", chain)
	}
	dup := e.rpc(t, `{"jsonrpc":"2.0","id":4,"method":"execution.fork","params":{"executionId":"p","at":`+at+`,"forkId":"p-sim"}}`)
	if errCode(t, dup) != wire.CodeExecutionExists {
		t.Fatalf("a second fork under the same id: %v", dup)
	}
	r = result(t, e.rpc(t, `{"jsonrpc":"2.0","id":5,"method":"execution.resume","params":{"executionId":"p-sim","eventType":"approve","payload":{"approved":false},"wait":true}}`))
	if out := stateOf(t, r)["variables"].(map[string]any)["_output"].(map[string]any); out["status"] != "rejected" {
		t.Fatalf("fork output %v", out)
	}
}

func eventCount(t *testing.T, e *env, id string) int {
	t.Helper()
	evs, err := store.Read(testCtx(t), e.events, id)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

func newRuntime(t *testing.T) *loom.Runtime {
	t.Helper()
	rt, err := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{orderFlow()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

func itoa(n int) string { return strconv.Itoa(n) }
