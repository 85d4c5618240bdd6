package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// listAuthorizer denies a "list" of the ids in deny and remembers every
// request it saw.
type listAuthorizer struct {
	mu   sync.Mutex
	deny map[string]bool
	seen []loom.AuthzRequest
}

func (a *listAuthorizer) Authorize(_ context.Context, req loom.AuthzRequest) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, req)
	if req.Action == "list" && a.deny[req.ExecutionID] {
		return errors.New("not yours to see")
	}
	return nil
}

func (a *listAuthorizer) requests() []loom.AuthzRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// listFlows: "park" parks on the gate "approve", "echo" returns its input,
// "inbox" receives one message on "in", "parent" spawns an echo child "k"
// and awaits it.
func listFlows() []*loom.Flow {
	park := loom.NewFlow("park", func(c *loom.Context, _ int) (int, error) { return loom.Suspend[int](c, "approve") })
	echo := loom.NewFlow("echo", func(c *loom.Context, n int) (int, error) { return n, nil })
	inbox := loom.NewFlow("inbox", func(c *loom.Context, _ int) (string, error) { return loom.Receive[string](c, "in") })
	parent := loom.NewFlow("parent", func(c *loom.Context, n int) (int, error) {
		k, err := loom.SpawnChild(c, "echo", "k", n)
		if err != nil {
			return 0, err
		}
		res, err := loom.AwaitChildTyped[int](c, k)
		return res + 1, err
	})
	return []*loom.Flow{park, echo, inbox, parent}
}

// listWorld is a runtime over a SQLite file, with the listFlows.
type listWorld struct {
	st    sqlite.Stores
	rt    *loom.Runtime
	authz *listAuthorizer
}

func newListWorld(t *testing.T, authz *listAuthorizer) *listWorld {
	t.Helper()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(t.TempDir(), "loom.db"), Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	cfg := loom.Config{Storage: st, Flows: listFlows(), Features: loom.Features{Inbox: true, Children: true},
		TimerPoll: -1, StickyParks: -1, Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)}
	if authz != nil {
		cfg.Authorizer = authz
	}
	rt, err := loom.New(cfg)
	if err != nil {
		_ = st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := errors.Join(rt.Close(), st.Close()); err != nil {
			t.Error(err)
		}
	})
	return &listWorld{st: st, rt: rt, authz: authz}
}

// start starts id of flow with input as who (nil: no principal) and waits
// until it parks or ends.
func (w *listWorld) start(t *testing.T, who any, flow, id string, in int) fold.State {
	t.Helper()
	ctx := t.Context()
	if who != nil {
		ctx = loom.WithPrincipal(ctx, who)
	}
	if _, err := w.rt.Start(ctx, flow, in, loom.WithExecutionID(id)); err != nil {
		t.Fatal(err)
	}
	st, err := w.rt.WaitForSettled(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// lengths is the length of every log in the store, inbox streams included.
func (w *listWorld) lengths(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for after := ""; ; {
		page, err := w.st.Events.ListExecutions(t.Context(), after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page.Executions {
			out[x.ExecutionID] = x.Length
		}
		if after = page.Next; after == "" {
			return out
		}
	}
}

// listAll pages List with q until Next is "", returning every row and the
// pages' sizes.
func listAll(t *testing.T, ctx context.Context, rt *loom.Runtime, q loom.ListQuery) (rows []loom.ExecutionSummary, pages []int) {
	t.Helper()
	for range 100 {
		page, err := rt.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, page.Executions...)
		pages = append(pages, len(page.Executions))
		if q.After = page.Next; q.After == "" {
			return rows, pages
		}
	}
	t.Fatal("List never reached the last page")
	return nil, nil
}

func idsOf(rows []loom.ExecutionSummary) []string {
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ExecutionID)
	}
	return ids
}

// TestListPagesTheStoreInIDOrderAndFoldsEachRow: List pages the event
// store in id order — Next continues exactly where the store page ended,
// an inbox stream is never a row, and a filtered page may be short or
// empty while Next is set — and each row carries the folded status,
// sequence, gate, parent link and fork lineage under the inspector's
// member names.
func TestListPagesTheStoreInIDOrderAndFoldsEachRow(t *testing.T) {
	w := newListWorld(t, nil)
	ctx := t.Context()
	w.start(t, nil, "park", "a-park", 0)
	w.start(t, nil, "echo", "b-echo", 7)
	w.start(t, nil, "inbox", "c-inbox", 0)
	if err := w.rt.Send(ctx, "c-inbox", "in", "hello"); err != nil { // its inbox stream: "__loom_inbox__:…"
		t.Fatal(err)
	}
	if _, err := w.rt.WaitForCompletion(ctx, "c-inbox"); err != nil {
		t.Fatal(err)
	}
	// d-parent and its child d-parent/k; the parent may park on its child
	// before it completes.
	w.start(t, nil, "parent", "d-parent", 1)
	if _, err := w.rt.WaitForCompletion(ctx, "d-parent"); err != nil {
		t.Fatal(err)
	}
	parked := w.start(t, nil, "park", "e-park", 0)
	if _, err := w.rt.Fork(ctx, "e-park", parked.Sequence, loom.ForkID("f-fork")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rt.WaitForSuspend(ctx, "f-fork"); err != nil {
		t.Fatal(err)
	}
	before := w.lengths(t)

	want := []string{"a-park", "b-echo", "c-inbox", "d-parent", "d-parent/k", "e-park", "f-fork"}
	for _, limit := range []int{1, 2, 3, 0} {
		rows, _ := listAll(t, ctx, w.rt, loom.ListQuery{Limit: limit})
		if got := idsOf(rows); !slices.Equal(got, want) {
			t.Fatalf("limit %d: paging listed %v, want %v", limit, got, want)
		}
	}
	// Next is the store page's end, whatever the page kept: the inbox
	// stream sorts first ("_" before "a"), so a page of one is empty.
	var stream string
	for id := range before { //loom:order-independent there is one stream
		if store.IsInboxStream(id) {
			stream = id
		}
	}
	first, err := w.rt.List(ctx, loom.ListQuery{Limit: 1})
	if err != nil || len(first.Executions) != 0 || first.Next != stream {
		t.Fatalf("the first page of one: %+v, %v; want no row and next %q", first, err, stream)
	}
	second, err := w.rt.List(ctx, loom.ListQuery{After: first.Next, Limit: 1})
	if err != nil || !slices.Equal(idsOf(second.Executions), []string{"a-park"}) || second.Next != "a-park" {
		t.Fatalf("the page after the stream: %+v, %v", second, err)
	}
	if third, err := w.rt.List(ctx, loom.ListQuery{After: "d-parent", Limit: 2}); err != nil ||
		!slices.Equal(idsOf(third.Executions), []string{"d-parent/k", "e-park"}) || third.Next != "e-park" {
		t.Fatalf("the page after d-parent: %+v, %v", third, err)
	}

	// Filters apply within each store page: short and empty pages, Next set.
	rows, pages := listAll(t, ctx, w.rt, loom.ListQuery{Limit: 2, Status: fold.StatusSuspended})
	// The store pages: [stream, a-park] [b-echo, c-inbox] [d-parent, d-parent/k] [e-park, f-fork].
	if got := idsOf(rows); !slices.Equal(got, []string{"a-park", "e-park", "f-fork"}) || len(pages) < 4 || !slices.Equal(pages[:4], []int{1, 0, 0, 2}) {
		t.Fatalf("status suspended: %v in pages of %v", got, pages)
	}
	if rows, _ := listAll(t, ctx, w.rt, loom.ListQuery{Limit: 3, FlowID: "echo"}); !slices.Equal(idsOf(rows), []string{"b-echo", "d-parent/k"}) {
		t.Fatalf("flow echo: %v", idsOf(rows))
	}
	if rows, _ := listAll(t, ctx, w.rt, loom.ListQuery{FlowID: "park", Status: fold.StatusCompleted}); len(rows) != 0 {
		t.Fatalf("flow park and status completed: %v", idsOf(rows))
	}

	// Each row: the store's listing and the folded state.
	page, err := w.rt.List(ctx, loom.ListQuery{Limit: loom.MaxListLimit * 10})
	if err != nil || len(page.Executions) != len(want) || page.Next != "" {
		t.Fatalf("one page over the ceiling: %+v, %v", page, err)
	}
	byID := map[string]loom.ExecutionSummary{}
	for _, r := range page.Executions {
		byID[r.ExecutionID] = r
		st, err := w.rt.LoadState(ctx, r.ExecutionID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != st.Status || r.Sequence != st.Sequence || r.UpdatedAt != st.UpdatedAt || r.Length != before[r.ExecutionID] || r.Length != st.Sequence+1 {
			t.Fatalf("%s: %+v, want the folded state's status %s, sequence %d, updatedAt %d and length %d",
				r.ExecutionID, r, st.Status, st.Sequence, st.UpdatedAt, before[r.ExecutionID])
		}
	}
	if r := byID["a-park"]; r.SuspendedOn != "approve" || r.WorkflowID != "park" {
		t.Fatalf("a-park: %+v", r)
	}
	if r := byID["b-echo"]; r.SuspendedOn != "" || r.Status != fold.StatusCompleted {
		t.Fatalf("b-echo: %+v", r)
	}
	var link loom.ParentLink
	if err := json.Unmarshal(byID["d-parent/k"].Parent, &link); err != nil || link.ExecutionID != "d-parent" || link.Name != "k" {
		t.Fatalf("the child's parent: %s, %v", byID["d-parent/k"].Parent, err)
	}
	if !strings.Contains(string(byID["f-fork"].ForkChain), `"e-park"`) || byID["e-park"].ForkChain != nil {
		t.Fatalf("fork lineage: f-fork %s, e-park %s", byID["f-fork"].ForkChain, byID["e-park"].ForkChain)
	}
	// The member names of the inspector's listing, exactly.
	var members map[string]json.RawMessage
	b, _ := json.Marshal(byID["d-parent/k"])
	if err := json.Unmarshal(b, &members); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(members)); !slices.Equal(got, []string{"executionId", "length", "parent", "sequence", "startedAt", "status", "updatedAt", "workflowId"}) {
		t.Fatalf("member names %v", got)
	}
	if after := w.lengths(t); !maps.Equal(after, before) {
		t.Fatalf("listing appended: %v -> %v", before, after)
	}
}

// TestListScopesToTheCallersTenantAndOmitsDeniedExecutionsRecordingNothing:
// a caller whose principal names a tenant sees only its tenant's
// executions; an Authorizer is asked a "list" of each remaining one, with
// its recorded tenant, and a denied one is left out — no EXECUTION_DENIED,
// no append to any log.
func TestListScopesToTheCallersTenantAndOmitsDeniedExecutionsRecordingNothing(t *testing.T) {
	authz := &listAuthorizer{deny: map[string]bool{"acme-2": true, "none-1": true}}
	w := newListWorld(t, authz)
	acme, globex := loom.Principal{ID: "ann", Tenant: "acme"}, loom.Principal{ID: "bob", Tenant: "globex"}
	w.start(t, acme, "park", "acme-1", 0)
	w.start(t, acme, "echo", "acme-2", 1)
	w.start(t, acme, "echo", "acme-3", 2)
	w.start(t, globex, "park", "globex-1", 0)
	w.start(t, nil, "echo", "none-1", 3)
	w.start(t, nil, "echo", "none-2", 4)
	before := w.lengths(t)
	asked := len(authz.requests())

	for _, c := range []struct {
		who  any
		want []string
	}{
		{acme, []string{"acme-1", "acme-3"}},
		{globex, []string{"globex-1"}},
		{loom.Principal{ID: "eve", Tenant: "initech"}, nil},
		{map[string]any{"id": "ops", "tenant": "globex"}, []string{"globex-1"}}, // a principal of another shape
		{"ops", []string{"acme-1", "acme-3", "globex-1", "none-2"}},             // no tenant: every tenant's
		{nil, []string{"acme-1", "acme-3", "globex-1", "none-2"}},
	} {
		ctx := t.Context()
		if c.who != nil {
			ctx = loom.WithPrincipal(ctx, c.who)
		}
		rows, _ := listAll(t, ctx, w.rt, loom.ListQuery{Limit: 2})
		if got := idsOf(rows); !slices.Equal(got, c.want) {
			t.Errorf("%v lists %v, want %v", c.who, got, c.want)
		}
		for _, r := range rows {
			if tenant, _, _ := strings.Cut(r.ExecutionID, "-"); tenant != "none" && r.Tenant != tenant {
				t.Errorf("%s: tenant %q", r.ExecutionID, r.Tenant)
			}
		}
	}
	var lists []loom.AuthzRequest
	for _, req := range authz.requests()[asked:] {
		if req.Action != "list" {
			t.Fatalf("listing asked the Authorizer for a %q", req.Action)
		}
		lists = append(lists, req)
	}
	// acme: 3, globex: 1, none of initech's, globex again: 1, then all six twice.
	if len(lists) != 3+1+1+6+6 {
		t.Fatalf("the Authorizer was asked %d lists, want one per execution each caller's tenant holds", len(lists))
	}
	for _, req := range lists {
		if req.ExecutionID == "acme-2" && (req.Tenant != "acme" || req.FlowID != "echo") {
			t.Fatalf("the Authorizer saw %+v", req)
		}
		if strings.HasPrefix(req.ExecutionID, "globex") && req.Tenant != "globex" {
			t.Fatalf("the Authorizer saw %+v", req)
		}
	}
	if after := w.lengths(t); !maps.Equal(after, before) {
		t.Fatalf("a list with denials appended: %v -> %v", before, after)
	}
}

// TestListRefusesABadQueryReadingNothing: a negative limit, an unknown
// status, a malformed flow id or cursor are refused with
// *loom.ListQueryError naming the member and what to send, before
// anything is read; nothing is appended.
func TestListRefusesABadQueryReadingNothing(t *testing.T) {
	authz := &listAuthorizer{}
	w := newListWorld(t, authz)
	w.start(t, nil, "park", "p-1", 0)
	before, asked := w.lengths(t), len(authz.requests())
	for _, c := range []struct {
		q            loom.ListQuery
		field, hints string
	}{
		{loom.ListQuery{Limit: -1}, "limit", "use 1 to 500"},
		{loom.ListQuery{Status: "parked"}, "status", "suspended"},
		{loom.ListQuery{Status: "Suspended"}, "status", "lower-case"},
		{loom.ListQuery{FlowID: "park\x00"}, "flowId", "a registered flow's id"},
		{loom.ListQuery{After: "p\xff"}, "after", "the next of the previous page"},
		{loom.ListQuery{After: strings.Repeat("x", 4097)}, "after", "the next of the previous page"},
	} {
		var qe *loom.ListQueryError
		page, err := w.rt.List(t.Context(), c.q)
		if !errors.As(err, &qe) || qe.Field != c.field || !strings.Contains(qe.Reason, c.hints) || page.Executions != nil {
			t.Errorf("%+v: %v (%+v), want a *ListQueryError on %s saying %q", c.q, err, page, c.field, c.hints)
		}
	}
	if len(authz.requests()) != asked {
		t.Fatal("a refused list asked the Authorizer")
	}
	if after := w.lengths(t); !maps.Equal(after, before) {
		t.Fatalf("a refused list appended: %v -> %v", before, after)
	}
}
