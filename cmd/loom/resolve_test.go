package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/wire"
)

// serveApp serves a's runtime over the wire with the token t0ken (as
// carol) and returns the --addr and --token arguments.
func serveApp(t *testing.T, a *app) []string {
	t.Helper()
	h, err := wire.Handler(a.rt, wire.Options{Events: a.stores.Events, Authenticate: wire.BearerToken("t0ken", map[string]string{"user": "carol"})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return []string{"--addr", strings.TrimPrefix(srv.URL, "http://"), "--token", "t0ken"}
}

// inDoubtApp recovers a crashed writer's store: order-2, whose charge was
// running when its process was killed, parks in doubt.
func inDoubtApp(t *testing.T, fx fixture) (*app, string) {
	t.Helper()
	path := crashedStore(t, fx)
	a, err := openApp(path, newStepClock("2026-01-08T09:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.close(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := a.rt.WaitForSuspend(ctx, "order-2")
	if err != nil || st.Variables.SuspendedOn.On != fold.GateInDoubt {
		t.Fatalf("order-2 is not parked in doubt: %+v %v", st.Variables.SuspendedOn, err)
	}
	return a, path
}

// TestResolveCommand resolves an in-doubt park left by a killed app: gate
// and state say what it is and what to run; a resume and every malformed or
// misdirected verdict is refused with nothing recorded; --done records the
// output and the order completes; on another copy --rerun charges again.
func TestResolveCommand(t *testing.T) {
	bin, fx := setup(t)
	a, path := inDoubtApp(t, fx)
	ctl := serveApp(t, a)
	with := func(args ...string) []string { return append(args, ctl...) }

	out := mustLoom(t, bin, with("gate", "order-2")...)
	for _, want := range []string{"in doubt about step charge attempt 1, since #", "loom resolve order-2 --done OUTPUT", "loom resolve order-2 --rerun"} {
		if !strings.Contains(out, want) {
			t.Fatalf("gate of an in-doubt park: no %q in\n%s", want, out)
		}
	}
	// The read-only commands, on the file the app holds open.
	if out := mustLoom(t, bin, "state", "order-2", "--store", path); !strings.Contains(out,
		"in doubt (since #") || !strings.Contains(out, "step charge attempt 1 may or may not have acted; resolve it with loom resolve order-2 --done OUTPUT or --rerun") {
		t.Fatalf("state of an in-doubt park:\n%s", out)
	}
	before := len(readLogLive(t, a, "order-2"))
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{with("resume", "order-2", "--event", gate, "--payload", `{"approved":true}`), exitRefused, `parked in doubt about step "charge" attempt 1`},
		{with("resume", "order-2", "--event", gate, "--payload", `{"approved":true}`), exitRefused, "loom resolve order-2 --done OUTPUT, or --rerun"},
		{with("resolve", "order-2"), exitUsage, "give one verdict: --done OUTPUT"},
		{with("resolve", "order-2", "--done", `"x"`, "--rerun"), exitUsage, "give one verdict"},
		{with("resolve", "order-2", "--done", "ch-7"), exitUsage, "--done is not JSON"},
		{with("resolve", "order-2", "--rerun", "--attempt", "2"), exitRefused, "attempt 2 but the park is in doubt about step \"charge\" attempt 1"},
		{with("resolve", "order-2", "--rerun", "--step", "quote"), exitRefused, "nothing was recorded"},
		{with("resolve", "order-1", "--rerun"), exitRefused, "order-1 is not parked in doubt (it is completed)"},
		{with("resolve", "order-9", "--rerun"), exitNotFound, "no such execution"},
	} {
		out, errOut, code := loomRun(t, bin, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) || strings.Contains(errOut, "schema") {
			t.Errorf("loom %v: exit %d, stderr %q (stdout %q); want exit %d saying %q", tc.args, code, errOut, out, tc.code, tc.says)
		}
	}
	if after := len(readLogLive(t, a, "order-2")); after != before {
		t.Fatalf("refused verdicts appended %d events", after-before)
	}
	out = mustLoom(t, bin, with("resolve", "order-2", "--done", `"ch-7-by-hand"`)...)
	if !strings.Contains(out, `Resolved order-2: step charge attempt 1 acted, with output "ch-7-by-hand"; the verdict is durable.`) ||
		!strings.Contains(out, `order-2 completed (#`) || !strings.Contains(out, `"charge":"ch-7-by-hand"`) {
		t.Fatalf("resolve --done:\n%s", out)
	}
	if out := mustLoom(t, bin, "logs", "order-2", "--store", path); !strings.Contains(out, `operator's verdict on charge attempt 1: {"verdict":"done","output":"ch-7-by-hand"}`) {
		t.Fatalf("logs do not show the verdict:\n%s", out)
	}

	b, _ := inDoubtApp(t, fx)
	var res wire.ResolveResult
	decodeJSON(t, mustLoom(t, bin, append([]string{"resolve", "order-2", "--rerun", "--json"}, serveApp(t, b)...)...), &res)
	st, err := fold.Decode(res.State)
	var output receipt
	if err != nil || st.Status != fold.StatusCompleted || st.Frames["charge"].Attempt != 2 ||
		json.Unmarshal(st.Variables.Output, &output) != nil || output.Charge != "ch-7" {
		t.Fatalf("resolve --rerun: %s %v", res.State, err)
	}
}

// readLogLive reads a log through the app's own store.
func readLogLive(t *testing.T, a *app, id string) []json.RawMessage {
	t.Helper()
	evs, err := a.stores.Events.ReadFrom(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]json.RawMessage, len(evs))
	for i, e := range evs {
		out[i] = e.Payload
	}
	return out
}

// TestRefusalDetailInTheCLI: an app's refusals come back with their detail
// — each schema violation, who holds a busy execution and when to retry —
// readable on stderr and, with --json, as the app's error object on
// stdout; gate shows the schema the answer must satisfy.
func TestRefusalDetailInTheCLI(t *testing.T) {
	bin, _ := setup(t)
	clock := newStepClock("2026-02-01T10:00:00Z")
	var leases func() sqlite.Stores
	a, err := openAppWith(filepath.Join(t.TempDir(), "leased.db"), clock, func(cfg *loom.Config, st sqlite.Stores) {
		cfg.Leases, cfg.NodeID = st.Leases, "node-here"
		leases = func() sqlite.Stores { return st }
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.close(); err != nil {
			t.Error(err)
		}
	}()
	ctl := serveApp(t, a)
	with := func(args ...string) []string { return append(args, ctl...) }
	mustLoom(t, bin, with("start", flowOrder, "--input", `{"item":"tea","qty":1}`, "--id", "w-1")...)

	out := mustLoom(t, bin, with("gate", "w-1")...)
	for _, want := range []string{"Gate       approve, since #", "Answer     loom resume w-1 --event approve --payload JSON",
		"Times out  never: it waits until answered", "The answer to approve must satisfy this JSON Schema:", `"required": [`, `"approved"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("gate: no %q in\n%s", want, out)
		}
	}
	var g wire.GateResult
	decodeJSON(t, mustLoom(t, bin, with("gate", "w-1", "--json")...), &g)
	var schema struct {
		Required []string `json:"required"`
	}
	if g.Gate == nil || g.Gate.On != gate || json.Unmarshal(g.Gate.Schema, &schema) != nil || len(schema.Required) != 1 || g.FlowID != flowOrder {
		t.Fatalf("gate --json: %+v", g)
	}
	if out := mustLoom(t, bin, "gate", "w-1", "--store", a.stores.DB.Path()); !strings.Contains(out, "The schema of approve lives in the flow's code") {
		t.Fatalf("gate --store:\n%s", out)
	}

	bad := with("resume", "w-1", "--event", gate, "--payload", `{"approved":"yes","note":7}`)
	_, errOut, code := loomRun(t, bin, bad...)
	if code != exitRefused || !strings.Contains(errOut, "at /approved (") || !strings.Contains(errOut, "): got string, want boolean") ||
		!strings.Contains(errOut, "at /note (") || !strings.Contains(errOut, "loom gate w-1 shows the schema the answer must satisfy") {
		t.Fatalf("a schema refusal: exit %d\n%s", code, errOut)
	}
	out, _, code = loomRun(t, bin, append(bad, "--json")...)
	var je struct {
		Code       int            `json:"code"`
		Message    string         `json:"message"`
		Data       wire.ErrorData `json:"data"`
		ExitStatus int            `json:"exitStatus"`
	}
	decodeJSON(t, out, &je)
	if code != exitRefused || je.Code != wire.CodePayloadInvalid || je.ExitStatus != exitRefused || len(je.Data.Violations) != 2 || je.Data.Gate != gate {
		t.Fatalf("a schema refusal with --json: exit %d %+v", code, je)
	}

	// Another node holds the lease: busy, with whom and until when.
	now := clock.Now()
	expires := now.Add(30 * time.Second)
	if _, err := leases().Leases.Acquire(context.Background(), "w-1", "node-dead", now.UnixMilli(), (30 * time.Second).Milliseconds()); err != nil {
		t.Fatal(err)
	}
	good := with("resume", "w-1", "--event", gate, "--payload", `{"approved":true}`)
	_, errOut, code = loomRun(t, bin, good...)
	if code != exitRefused || !strings.Contains(errOut, "execution w-1 is driven by node node-dead") ||
		!strings.Contains(errOut, "retry after "+stamp(expires.UnixMilli())) {
		t.Fatalf("busy: exit %d\n%s", code, errOut)
	}
	out, _, code = loomRun(t, bin, append(good, "--json")...)
	decodeJSON(t, out, &je)
	if code != exitRefused || je.Code != wire.CodeBusy || je.Data.Owner != "node-dead" || je.Data.ExpiresAt != expires.UnixMilli() {
		t.Fatalf("busy with --json: exit %d %+v", code, je)
	}
}
