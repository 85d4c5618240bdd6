package wire_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// listDenier denies a "list" of the ids in deny, and counts the lists it
// was asked.
type listDenier struct {
	mu    sync.Mutex
	deny  map[string]bool
	lists int
}

func (a *listDenier) Authorize(_ context.Context, req loom.AuthzRequest) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if req.Action != "list" {
		return nil
	}
	a.lists++
	if a.deny[req.ExecutionID] {
		return errors.New("not for your eyes")
	}
	return nil
}

// listEnv is a runtime served on loopback to three callers, each with its
// own token: ann of tenant acme, bob of tenant globex, and ops, whose
// principal names no tenant.
type listEnv struct {
	events  *memstore.EventStore
	rt      *loom.Runtime
	callers map[string]*wire.Client
}

func newListEnv(t *testing.T, authz loom.ExecutionAuthorizer) *listEnv {
	t.Helper()
	e := &listEnv{events: memstore.NewEventStore(), callers: map[string]*wire.Client{}}
	park := loom.NewFlow("park", func(c *loom.Context, _ int) (int, error) { return loom.Suspend[int](c, "approve") })
	echo := loom.NewFlow("echo", func(c *loom.Context, n int) (int, error) { return n, nil })
	cfg := loom.Config{Events: e.events, Flows: []*loom.Flow{park, echo}, StickyParks: -1,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)}
	if authz != nil {
		cfg.Authorizer = authz
	}
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.rt = rt
	principals := map[string]any{
		"ann": loom.Principal{ID: "ann", Tenant: "acme"},
		"bob": loom.Principal{ID: "bob", Tenant: "globex"},
		"ops": "ops",
	}
	var checks []func(*http.Request) (any, error)
	for _, who := range slices.Sorted(maps.Keys(principals)) {
		checks = append(checks, wire.BearerToken(who+"-token", principals[who]))
	}
	h, err := wire.Handler(rt, wire.Options{Events: e.events, Authenticate: func(r *http.Request) (any, error) {
		for _, check := range checks {
			if p, err := check(r); err == nil {
				return p, nil
			}
		}
		return nil, wire.ErrUnauthenticated
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	for who := range principals { //loom:order-independent one client each
		if e.callers[who], err = wire.NewClient(srv.URL, wire.WithToken(who+"-token")); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// start starts id over the wire as who, waiting until it parks or ends.
func (e *listEnv) start(t *testing.T, who, flow, id string) {
	t.Helper()
	if _, err := e.callers[who].Start(testCtx(t), wire.StartParams{FlowID: flow, ExecutionID: id, Input: json.RawMessage("1"), Wait: true}); err != nil {
		t.Fatal(err)
	}
}

// lengths is the length of every log in the store.
func (e *listEnv) lengths(t *testing.T) map[string]int64 {
	t.Helper()
	page, err := e.events.ListExecutions(testCtx(t), "", 1000)
	if err != nil || page.Next != "" {
		t.Fatalf("listing: %v", err)
	}
	out := map[string]int64{}
	for _, x := range page.Executions {
		out[x.ExecutionID] = x.Length
	}
	return out
}

// listAllOverTheWire pages execution.list with p until next is absent.
func listAllOverTheWire(t *testing.T, cl *wire.Client, p wire.ListParams) (ids []string, pages int) {
	t.Helper()
	for range 100 {
		res, err := cl.List(testCtx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Executions == nil {
			t.Fatal("executions is absent, not an array")
		}
		for _, x := range res.Executions {
			ids = append(ids, x.ExecutionID)
		}
		pages++
		if p.After = res.Next; p.After == "" {
			return ids, pages
		}
	}
	t.Fatal("execution.list never reached the last page")
	return nil, 0
}

// execution.list pages the store over HTTP: every execution once across
// several pages, the filters within each page, and each summary under the
// inspector's member names with its folded status.
func TestListOverTheWirePagesAndFilters(t *testing.T) {
	e := newListEnv(t, nil)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		flow := "echo"
		if id == "b" || id == "d" {
			flow = "park"
		}
		e.start(t, "ops", flow, id)
	}
	cl := e.callers["ops"]
	if ids, pages := listAllOverTheWire(t, cl, wire.ListParams{Limit: 2}); !slices.Equal(ids, []string{"a", "b", "c", "d", "e"}) || pages != 3 {
		t.Fatalf("paging by 2: %v in %d pages", ids, pages)
	}
	if ids, _ := listAllOverTheWire(t, cl, wire.ListParams{Limit: 2, Status: fold.StatusSuspended}); !slices.Equal(ids, []string{"b", "d"}) {
		t.Fatalf("status suspended: %v", ids)
	}
	if ids, _ := listAllOverTheWire(t, cl, wire.ListParams{FlowID: "echo"}); !slices.Equal(ids, []string{"a", "c", "e"}) {
		t.Fatalf("flow echo: %v", ids)
	}
	// A filtered page is short, and next still pages the store.
	res, err := cl.List(testCtx(t), wire.ListParams{Limit: 2, FlowID: "park", After: "b"})
	if err != nil || len(res.Executions) != 1 || res.Executions[0].ExecutionID != "d" || res.Next != "d" {
		t.Fatalf("a short page: %+v, %v", res, err)
	}
	var raw struct {
		Executions []map[string]json.RawMessage `json:"executions"`
		Next       *string                      `json:"next"`
	}
	if err := cl.Call(testCtx(t), wire.MethodList, map[string]any{"after": "a", "limit": 1}, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Executions) != 1 || raw.Next == nil || *raw.Next != "b" {
		t.Fatalf("raw page: %+v", raw)
	}
	row := raw.Executions[0]
	if got := slices.Sorted(maps.Keys(row)); !slices.Equal(got, []string{"executionId", "length", "sequence", "startedAt", "status", "suspendedOn", "updatedAt", "workflowId"}) {
		t.Fatalf("summary members %v", got)
	}
	st, err := e.rt.LoadState(testCtx(t), "b")
	if err != nil {
		t.Fatal(err)
	}
	if string(row["status"]) != `"suspended"` || string(row["suspendedOn"]) != `"approve"` || string(row["sequence"]) != jsonInt(st.Sequence) {
		t.Fatalf("summary %v, want the folded state (sequence %d)", row, st.Sequence)
	}
	var whole wire.ListResult
	if err := cl.Call(testCtx(t), wire.MethodList, nil, &whole); err != nil || len(whole.Executions) != 5 || whole.Next != "" {
		t.Fatalf("list without params: %+v, %v", whole, err)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// Each caller sees its own tenant's executions only; a caller whose
// principal names no tenant sees them all.
func TestListOverTheWireIsScopedToTheCallersTenant(t *testing.T) {
	e := newListEnv(t, nil)
	e.start(t, "ann", "park", "acme-1")
	e.start(t, "bob", "park", "globex-1")
	e.start(t, "ann", "echo", "acme-2")
	e.start(t, "bob", "echo", "globex-2")
	for who, want := range map[string][]string{
		"ann": {"acme-1", "acme-2"},
		"bob": {"globex-1", "globex-2"},
		"ops": {"acme-1", "acme-2", "globex-1", "globex-2"},
	} { //loom:order-independent each caller is separate
		ids, _ := listAllOverTheWire(t, e.callers[who], wire.ListParams{Limit: 1})
		if !slices.Equal(ids, want) {
			t.Errorf("%s lists %v, want %v", who, ids, want)
		}
	}
	res, err := e.callers["ann"].List(testCtx(t), wire.ListParams{})
	if err != nil || len(res.Executions) != 2 || res.Executions[0].Tenant != "acme" {
		t.Fatalf("ann's page: %+v, %v", res, err)
	}
}

// An Authorizer's denied executions are left out of the page, and the
// denials are recorded nowhere: no log grows.
func TestListOverTheWireOmitsDeniedExecutionsAndAppendsNothing(t *testing.T) {
	authz := &listDenier{deny: map[string]bool{"b": true, "c": true}}
	e := newListEnv(t, authz)
	for _, id := range []string{"a", "b", "c", "d"} {
		e.start(t, "ops", "park", id)
	}
	before := e.lengths(t)
	ids, _ := listAllOverTheWire(t, e.callers["ops"], wire.ListParams{Limit: 3})
	if !slices.Equal(ids, []string{"a", "d"}) {
		t.Fatalf("listed %v, want the undenied a and d", ids)
	}
	authz.mu.Lock()
	lists := authz.lists
	authz.mu.Unlock()
	if lists != 4 {
		t.Fatalf("the Authorizer was asked %d lists, want one per execution", lists)
	}
	if after := e.lengths(t); !maps.Equal(after, before) {
		t.Fatalf("a list with denials appended: %v -> %v", before, after)
	}
}

// Bad params are CodeInvalidParams — data.field and data.reason for a query
// the kernel refuses — and nothing is read or appended.
func TestListOverTheWireRefusesBadParams(t *testing.T) {
	authz := &listDenier{}
	e := newListEnv(t, authz)
	e.start(t, "ops", "park", "a")
	before := e.lengths(t)
	cl := e.callers["ops"]
	for _, c := range []struct {
		params any
		field  string
	}{
		{map[string]any{"limit": -1}, "limit"},
		{map[string]any{"status": "parked"}, "status"},
		{map[string]any{"flowId": "bad\u0001flow"}, "flowId"},
		{map[string]any{"Limit": 5}, ""},               // names are exact
		{map[string]any{"tenant": "acme"}, ""},         // no such param
		{map[string]any{"limit": "ten"}, ""},           // mistyped (data.location)
		{map[string]any{"after": []int{1}}, ""},        // mistyped
		{[]any{"a", 1}, ""},                            // by-position params
		{map[string]any{"status": 3}, ""},              // mistyped
		{map[string]any{"after": "", "limit": 0}, "-"}, // valid: the defaults
	} {
		var res wire.ListResult
		err := cl.Call(testCtx(t), wire.MethodList, c.params, &res)
		if c.field == "-" {
			if err != nil || len(res.Executions) != 1 {
				t.Errorf("%v: %+v, %v", c.params, res, err)
			}
			continue
		}
		we := wireErr(t, err, wire.CodeInvalidParams)
		if d := we.Detail(); d.Field != c.field || (c.field != "" && d.Reason == "") {
			t.Errorf("%v: data %s, want field %q with a reason", c.params, we.Data, c.field)
		}
	}
	authz.mu.Lock()
	defer authz.mu.Unlock()
	if authz.lists != 1 {
		t.Fatalf("refused lists asked the Authorizer: %d lists, want only the valid call's", authz.lists)
	}
	if after := e.lengths(t); !maps.Equal(after, before) {
		t.Fatalf("a refused list appended: %v -> %v", before, after)
	}
}
