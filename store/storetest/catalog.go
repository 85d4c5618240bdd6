package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// catalogKit carries the factory through the ExecutionCatalog subtests.
type catalogKit struct{ f EventStoreFactory }

// RunExecutionCatalog runs the ExecutionCatalog conformance kit against
// the event stores f builds, which must implement store.ExecutionCatalog
// (the kit fails otherwise): each entry's fields and every status move, the
// search order (newest start first, then id), each filter and their
// counts, paging while executions are created, refused writes and queries
// leaving it unchanged, inbox streams left out, fork copies, deletion,
// concurrent appenders, agreement with the fold on seeded logs, Close, and
// Reopen when f.Reopen is set. Subtests that need store.PrefixCopier,
// store.ExecutionDeleter or store.Fencer skip, by name, when the store
// lacks it.
func RunExecutionCatalog(t *testing.T, f EventStoreFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: EventStoreFactory.New is nil")
	}
	k := catalogKit{f: f}
	t.Run("Entries", k.entries)
	t.Run("StatusMoves", k.statusMoves)
	t.Run("Order", k.order)
	t.Run("Filters", k.filters)
	t.Run("Paging", k.paging)
	t.Run("PagingWhileCreating", k.pagingWhileCreating)
	t.Run("RefusedWritesLeaveIt", k.refusedWrites)
	t.Run("RefusedQueries", k.refusedQueries)
	t.Run("InboxStreamsExcluded", k.inboxStreams)
	t.Run("ForkCopiesTheEntry", k.fork)
	t.Run("DeleteExecution", k.deleteExecution)
	t.Run("ConcurrentAppenders", k.concurrent)
	t.Run("AgreesWithTheFold", k.agreesWithFold)
	t.Run("Closed", k.closed)
	if f.Reopen != nil {
		t.Run("Reopen", k.reopen)
	} else {
		t.Log("storetest: EventStoreFactory.Reopen is nil, so the catalog's durability across a reopen is not checked")
	}
}

func (k catalogKit) open(t *testing.T) (store.EventStore, store.ExecutionCatalog) {
	t.Helper()
	s := openStore(t, "EventStoreFactory.New", k.f.New)
	return s, catalogOf(t, s)
}

func catalogOf(t *testing.T, s store.EventStore) store.ExecutionCatalog {
	t.Helper()
	c, ok := s.(store.ExecutionCatalog)
	if !ok {
		t.Fatalf("storetest: %T does not implement store.ExecutionCatalog", s)
	}
	return c
}

// startedAt returns a log of exec starting at the recorded time at: an
// EXECUTION_STARTED by principal (nil for none) then the lifecycle events
// of types, each a millisecond after the one before.
func startedAt(exec string, at int64, principal string, types ...string) []event.Envelope {
	first := lifecycleAt(exec, 0, event.ExecutionStarted)
	if principal != "" {
		first.Payload = json.RawMessage(`{"input":{"n":1},"principal":` + principal + `}`)
	}
	evs := append([]event.Envelope{first}, lifecycle(exec, 1, types...)...)
	for i := range evs {
		evs[i].Timestamp = at + int64(i)
	}
	return evs
}

// catalogEntry is the entry the kit expects for a log of the default flow.
func catalogEntry(exec, tenant string, status store.CatalogStatus, startedAt, statusAt int64) store.CatalogEntry {
	return store.CatalogEntry{ExecutionID: exec, WorkflowID: "wf-storetest", Tenant: tenant, Status: status,
		StartedAt: startedAt, StatusAt: statusAt}
}

// searchAll pages through every entry q selects with pageSize and checks
// the paging contract on the way: pages within the limit, the search order
// kept across pages, no entry twice, Next advancing and "" exactly on the
// last page.
func searchAll(t *testing.T, c store.ExecutionCatalog, q store.CatalogQuery, pageSize int) []store.CatalogEntry {
	t.Helper()
	var all []store.CatalogEntry
	q.Limit = pageSize
	for pages := 0; ; pages++ {
		page, err := c.SearchExecutions(context.Background(), q)
		if err != nil {
			t.Fatalf("SearchExecutions(%+v): %v", q, err)
		}
		if len(page.Entries) > store.CatalogLimit(pageSize) {
			t.Fatalf("SearchExecutions(limit %d) returned %d entries", pageSize, len(page.Entries))
		}
		if len(page.Entries) == 0 && page.Next != "" {
			t.Fatalf("SearchExecutions(after %q): an empty page with Next %q", q.After, page.Next)
		}
		if len(page.Entries) == 0 && pages > 0 {
			t.Fatalf("SearchExecutions: the page before after %q had Next set but this one is empty: Next must be \"\" on the last page", q.After)
		}
		for _, e := range page.Entries {
			if n := len(all); n > 0 && !store.CatalogBefore(all[n-1].StartedAt, all[n-1].ExecutionID, e.StartedAt, e.ExecutionID) {
				t.Fatalf("SearchExecutions: %q (started %d) is out of order after %q (started %d): newest start first, then id",
					e.ExecutionID, e.StartedAt, all[n-1].ExecutionID, all[n-1].StartedAt)
			}
			all = append(all, e)
		}
		if page.Next == "" {
			return all
		}
		if want := store.CatalogCursor(page.Entries[len(page.Entries)-1]); page.Next != want {
			t.Fatalf("SearchExecutions: Next is %q, want the cursor of the page's last entry %q", page.Next, want)
		}
		q.After = page.Next
		if pages > 1_000_000 {
			t.Fatal("SearchExecutions: paging does not end")
		}
	}
}

// assertCatalog fails t unless searching q gives exactly want, in order,
// at every page size from 1 to len(want)+1.
func assertCatalog(t *testing.T, c store.ExecutionCatalog, q store.CatalogQuery, want ...store.CatalogEntry) {
	t.Helper()
	if want == nil {
		want = []store.CatalogEntry{}
	}
	for size := 1; size <= len(want)+1; size++ {
		got := searchAll(t, c, q, size)
		if got == nil {
			got = []store.CatalogEntry{}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("SearchExecutions(%+v) by pages of %d:\n got  %+v\n want %+v", q, size, got, want)
		}
	}
}

// assertCounts fails t unless CountExecutions(q) is want.
func assertCounts(t *testing.T, c store.ExecutionCatalog, q store.CatalogQuery, want store.CatalogCounts) {
	t.Helper()
	got, err := c.CountExecutions(context.Background(), q)
	if err != nil {
		t.Fatalf("CountExecutions(%+v): %v", q, err)
	}
	if len(got) != len(want) {
		t.Fatalf("CountExecutions(%+v) = %v, want %v", q, got, want)
	}
	for s, n := range want { //loom:order-independent each count compared on its own
		if got[s] != n {
			t.Fatalf("CountExecutions(%+v) = %v, want %v", q, got, want)
		}
	}
}

// entries: an entry holds its flow, the tenant of its starting principal,
// its start time and the status and time of its last status move.
func (k catalogKit) entries(t *testing.T) {
	s, c := k.open(t)
	mustAppend(t, s, "a", 0, startedAt("a", 5000, `{"tenant":"acme","subject":"u1"}`))
	mustAppend(t, s, "b", 0, startedAt("b", 4000, `"just a name"`, event.ExecutionSuspended))
	mustAppend(t, s, "c", 0, startedAt("c", 3000, `{"Tenant":"acme"}`, event.ExecutionCompleted))
	other := startedAt("d", 2000, "")
	for i := range other {
		other[i].WorkflowID = "wf-other"
	}
	mustAppend(t, s, "d", 0, other)
	d := catalogEntry("d", "", store.CatalogRunning, 2000, 2000)
	d.WorkflowID = "wf-other"
	assertCatalog(t, c, store.CatalogQuery{},
		catalogEntry("a", "acme", store.CatalogRunning, 5000, 5000),
		catalogEntry("b", "", store.CatalogSuspended, 4000, 4001),
		// A principal whose member is a case variant of "tenant" names none:
		// member names are matched exactly.
		catalogEntry("c", "", store.CatalogCompleted, 3000, 3001),
		d)
}

// statusMoves: every status-moving event sets its status and time; other
// events, an unstamped CONTINUED among them, keep both; a log with no
// status-moving event is pending at its start.
func (k catalogKit) statusMoves(t *testing.T) {
	s, c := k.open(t)
	at := func(e event.Envelope, ts int64) event.Envelope { e.Timestamp = ts; return e }
	mustAppend(t, s, "x", 0, []event.Envelope{at(envelopeAt("x", 0), 100)})
	want := catalogEntry("x", "", store.CatalogPending, 100, 100)
	assertCatalog(t, c, store.CatalogQuery{}, want)
	steps := []struct {
		e      event.Envelope
		status store.CatalogStatus
		moves  bool
	}{
		{lifecycleAt("x", 1, event.ExecutionStarted), store.CatalogRunning, true},
		{envelopeAt("x", 2), store.CatalogRunning, false},
		{lifecycleAt("x", 3, event.ExecutionSuspended), store.CatalogSuspended, true},
		{lifecycleAt("x", 4, event.ExecutionResumed), store.CatalogRunning, true},
		{continuedAt("x", 5, "y", false), store.CatalogRunning, false},
		{lifecycleAt("x", 6, event.ExecutionFailed), store.CatalogFailed, true},
		{lifecycleAt("x", 7, event.ExecutionResumed), store.CatalogRunning, true},
		{lifecycleAt("x", 8, event.ExecutionCancelled), store.CatalogCancelled, true},
		{lifecycleAt("x", 9, event.ExecutionResumed), store.CatalogRunning, true},
		{continuedAt("x", 10, "y", true), store.CatalogContinued, true},
		{lifecycleAt("x", 11, event.ExecutionResumed), store.CatalogRunning, true},
		{lifecycleAt("x", 12, event.ExecutionCompleted), store.CatalogCompleted, true},
	}
	for _, st := range steps {
		e := at(st.e, 100+st.e.Sequence*10)
		mustAppend(t, s, "x", e.Sequence, []event.Envelope{e})
		want.Status = st.status
		if st.moves {
			want.StatusAt = e.Timestamp
		}
		assertCatalog(t, c, store.CatalogQuery{}, want)
	}
	// A batch is decided by its last status-moving event.
	batch := []event.Envelope{at(lifecycleAt("z", 0, event.ExecutionStarted), 50), at(lifecycleAt("z", 1, event.ExecutionSuspended), 51),
		at(envelopeAt("z", 2), 52)}
	mustAppend(t, s, "z", 0, batch)
	assertCatalog(t, c, store.CatalogQuery{Prefix: "z"}, catalogEntry("z", "", store.CatalogSuspended, 50, 51))
}

// order: newest start first; equal starts by id in code-point order.
func (k catalogKit) order(t *testing.T) {
	s, c := k.open(t)
	ids := []string{"m", "B", "a", "é", "z", "aa"}
	starts := []int64{10, 30, 30, 20, 30, 10}
	for i, id := range ids {
		mustAppend(t, s, id, 0, startedAt(id, starts[i], ""))
	}
	e := func(id string, ts int64) store.CatalogEntry {
		return catalogEntry(id, "", store.CatalogRunning, ts, ts)
	}
	assertCatalog(t, c, store.CatalogQuery{}, e("B", 30), e("a", 30), e("z", 30), e("é", 20), e("aa", 10), e("m", 10))
}

// filters: each filter selects by equality (the prefix by prefix), they
// combine, and the counts count what they select by status.
func (k catalogKit) filters(t *testing.T) {
	s, c := k.open(t)
	acme := `{"tenant":"acme"}`
	logs := []struct {
		id, principal, flow string
		at                  int64
		types               []string
	}{
		{"order-1", acme, "orders", 100, nil},
		{"order-2", acme, "orders", 200, []string{event.ExecutionSuspended}},
		{"order-10", `{"tenant":"bolt"}`, "orders", 300, []string{event.ExecutionCompleted}},
		{"invoice-1", acme, "invoices", 400, []string{event.ExecutionFailed}},
		{"invoice-2", "", "invoices", 500, []string{event.ExecutionSuspended}},
		{"orderly", "", "orders", 600, []string{event.ExecutionCancelled}},
	}
	for _, l := range logs {
		evs := startedAt(l.id, l.at, l.principal, l.types...)
		for i := range evs {
			evs[i].WorkflowID = l.flow
		}
		mustAppend(t, s, l.id, 0, evs)
	}
	entry := func(i int, tenant string, status store.CatalogStatus) store.CatalogEntry {
		l := logs[i]
		at := l.at
		if len(l.types) > 0 {
			at++
		}
		e := catalogEntry(l.id, tenant, status, l.at, at)
		e.WorkflowID = l.flow
		return e
	}
	o1, o2, o10 := entry(0, "acme", store.CatalogRunning), entry(1, "acme", store.CatalogSuspended), entry(2, "bolt", store.CatalogCompleted)
	i1, i2, ol := entry(3, "acme", store.CatalogFailed), entry(4, "", store.CatalogSuspended), entry(5, "", store.CatalogCancelled)
	cases := []struct {
		q      store.CatalogQuery
		want   []store.CatalogEntry
		counts store.CatalogCounts
	}{
		{store.CatalogQuery{}, []store.CatalogEntry{ol, i2, i1, o10, o2, o1}, store.CatalogCounts{"running": 1, "suspended": 2, "completed": 1, "failed": 1, "cancelled": 1}},
		{store.CatalogQuery{Prefix: "order-"}, []store.CatalogEntry{o10, o2, o1}, store.CatalogCounts{"running": 1, "suspended": 1, "completed": 1}},
		{store.CatalogQuery{Prefix: "order-1"}, []store.CatalogEntry{o10, o1}, store.CatalogCounts{"running": 1, "completed": 1}},
		{store.CatalogQuery{Prefix: "nothing"}, nil, store.CatalogCounts{}},
		{store.CatalogQuery{WorkflowID: "invoices"}, []store.CatalogEntry{i2, i1}, store.CatalogCounts{"suspended": 1, "failed": 1}},
		{store.CatalogQuery{Tenant: "acme"}, []store.CatalogEntry{i1, o2, o1}, store.CatalogCounts{"running": 1, "suspended": 1, "failed": 1}},
		{store.CatalogQuery{Status: store.CatalogSuspended}, []store.CatalogEntry{i2, o2}, store.CatalogCounts{"running": 1, "suspended": 2, "completed": 1, "failed": 1, "cancelled": 1}},
		{store.CatalogQuery{Status: store.CatalogSuspended, WorkflowID: "orders", Tenant: "acme", Prefix: "order"}, []store.CatalogEntry{o2},
			store.CatalogCounts{"running": 1, "suspended": 1}},
		{store.CatalogQuery{WorkflowID: "orders", Tenant: "bolt", Status: store.CatalogRunning}, nil, store.CatalogCounts{"completed": 1}},
	}
	for _, tc := range cases {
		assertCatalog(t, c, tc.q, tc.want...)
		assertCounts(t, c, tc.q, tc.counts)
	}
}

// paging: many entries with shared start times, through pages of every
// size; a limit past the ceiling is lowered to it, not refused.
func (k catalogKit) paging(t *testing.T) {
	s, c := k.open(t)
	var want []store.CatalogEntry
	for i := range 23 {
		id := fmt.Sprintf("p%02d", i)
		at := int64(1000 - (i/4)*10) // four to a start time
		mustAppend(t, s, id, 0, startedAt(id, at, ""))
		want = append(want, catalogEntry(id, "", store.CatalogRunning, at, at))
	}
	assertCatalog(t, c, store.CatalogQuery{}, want...)
	page, err := c.SearchExecutions(context.Background(), store.CatalogQuery{Limit: store.MaxCatalogLimit + 1})
	if err != nil || len(page.Entries) != len(want) || page.Next != "" {
		t.Fatalf("SearchExecutions(limit past the ceiling) = %d entries, next %q, %v; want all %d, no next", len(page.Entries), page.Next, err, len(want))
	}
	page, err = c.SearchExecutions(context.Background(), store.CatalogQuery{})
	if err != nil || len(page.Entries) != min(len(want), store.DefaultCatalogLimit) {
		t.Fatalf("SearchExecutions(no limit) = %d entries, %v; want the default page", len(page.Entries), err)
	}
}

// pagingWhileCreating: an execution created during a walk is on a later
// page iff it sorts after the cursor, and no entry is seen twice.
func (k catalogKit) pagingWhileCreating(t *testing.T) {
	s, c := k.open(t)
	for i := range 10 {
		id := fmt.Sprintf("w%02d", i)
		mustAppend(t, s, id, 0, startedAt(id, int64(1000-i*10), ""))
	}
	page, err := c.SearchExecutions(context.Background(), store.CatalogQuery{Limit: 4})
	if err != nil || len(page.Entries) != 4 || page.Next == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	// Newer than the cursor: before it, never seen. Older: after it, seen.
	// A status move of an entry already seen changes nothing of the walk.
	mustAppend(t, s, "newer", 0, startedAt("newer", 5000, ""))
	mustAppend(t, s, "older", 0, startedAt("older", 1, ""))
	mustAppend(t, s, "w00", 1, lifecycle("w00", 1, event.ExecutionCompleted))
	mustAppend(t, s, "w08", 1, lifecycle("w08", 1, event.ExecutionSuspended))
	rest := searchAll(t, c, store.CatalogQuery{After: page.Next}, 3)
	var ids []string
	for _, e := range append(page.Entries, rest...) {
		ids = append(ids, e.ExecutionID)
	}
	want := []string{"w00", "w01", "w02", "w03", "w04", "w05", "w06", "w07", "w08", "w09", "older"}
	if !slices.Equal(ids, want) {
		t.Fatalf("a walk while executions were created saw %v, want %v", ids, want)
	}
	if rest[4].Status != store.CatalogSuspended {
		t.Fatalf("w08 after its move: %+v, want suspended", rest[4])
	}
}

// snapshotOf is every entry the catalog holds, and its counts.
func snapshotOf(t *testing.T, c store.ExecutionCatalog) ([]store.CatalogEntry, store.CatalogCounts) {
	t.Helper()
	counts, err := c.CountExecutions(context.Background(), store.CatalogQuery{})
	if err != nil {
		t.Fatalf("CountExecutions: %v", err)
	}
	return searchAll(t, c, store.CatalogQuery{}, store.MaxCatalogLimit), counts
}

// refusedWrites: an append refused for its sequence, its shape or its
// fence changes no entry and creates none.
func (k catalogKit) refusedWrites(t *testing.T) {
	s, c := k.open(t)
	mustAppend(t, s, "r", 0, startedAt("r", 100, `{"tenant":"acme"}`))
	before, counts := snapshotOf(t, c)
	ctx := context.Background()
	if err := s.Append(ctx, "r", 0, lifecycle("r", 0, event.ExecutionCompleted)); !errors.As(err, new(*store.SequenceConflictError)) {
		t.Fatalf("a duplicate sequence: %v, want *store.SequenceConflictError", err)
	}
	if err := s.Append(ctx, "r", 5, lifecycle("r", 5, event.ExecutionCompleted)); !errors.As(err, new(*store.SequenceConflictError)) {
		t.Fatalf("a gap: %v, want *store.SequenceConflictError", err)
	}
	bad := lifecycle("r", 1, event.ExecutionSuspended, event.ExecutionCompleted)
	bad[1].Sequence = 7
	if err := s.Append(ctx, "r", 1, bad); err == nil {
		t.Fatal("a batch with a gap inside was accepted")
	}
	if err := s.Append(ctx, "new", 0, []event.Envelope{lifecycleAt("other", 0, event.ExecutionStarted)}); err == nil {
		t.Fatal("a batch of another execution's events was accepted")
	}
	if f, ok := s.(store.Fencer); ok {
		tok, err := f.AcquireFence(ctx, "r")
		if err != nil {
			t.Fatalf("AcquireFence: %v", err)
		}
		if _, err := f.AcquireFence(ctx, "r"); err != nil {
			t.Fatalf("AcquireFence: %v", err)
		}
		if err := f.AppendFenced(ctx, "r", tok, 1, lifecycle("r", 1, event.ExecutionCompleted)); !errors.As(err, new(*store.FencedError)) {
			t.Fatalf("a stale fence: %v, want *store.FencedError", err)
		}
	}
	after, countsAfter := snapshotOf(t, c)
	if !slices.Equal(before, after) || fmt.Sprint(counts) != fmt.Sprint(countsAfter) {
		t.Fatalf("refused writes changed the catalog:\n before %+v %v\n after  %+v %v", before, counts, after, countsAfter)
	}
}

// refusedQueries: a malformed query is refused with
// *store.InvalidCatalogQueryError naming its member.
func (k catalogKit) refusedQueries(t *testing.T) {
	s, c := k.open(t)
	mustAppend(t, s, "q", 0, startedAt("q", 100, ""))
	ctx := context.Background()
	for _, tc := range []struct {
		q     store.CatalogQuery
		field string
	}{
		{store.CatalogQuery{Status: "done"}, "status"},
		{store.CatalogQuery{Status: "Running"}, "status"},
		{store.CatalogQuery{After: "not a cursor"}, "after"},
		{store.CatalogQuery{After: "12:"}, "after"},
		{store.CatalogQuery{After: "x:q"}, "after"},
		{store.CatalogQuery{Prefix: "a\x00"}, "prefix"},
		{store.CatalogQuery{WorkflowID: "\xff"}, "workflowId"},
		{store.CatalogQuery{Tenant: "t\x00"}, "tenant"},
	} {
		_, err := c.SearchExecutions(ctx, tc.q)
		var bad *store.InvalidCatalogQueryError
		if !errors.As(err, &bad) || bad.Field != tc.field {
			t.Fatalf("SearchExecutions(%+v) = %v, want *store.InvalidCatalogQueryError on %q", tc.q, err, tc.field)
		}
		if tc.field == "status" || tc.field == "after" {
			continue // CountExecutions ignores them
		}
		if _, err := c.CountExecutions(ctx, tc.q); !errors.As(err, &bad) || bad.Field != tc.field {
			t.Fatalf("CountExecutions(%+v) = %v, want *store.InvalidCatalogQueryError on %q", tc.q, err, tc.field)
		}
	}
	if _, err := c.CountExecutions(ctx, store.CatalogQuery{Status: "done", After: "junk"}); err != nil {
		t.Fatalf("CountExecutions ignores Status and After: %v", err)
	}
}

// inboxStreams: an inbox stream is a log of messages, not an execution.
func (k catalogKit) inboxStreams(t *testing.T) {
	s, c := k.open(t)
	inbox := store.InboxStreamPrefix + "x"
	mustAppend(t, s, inbox, 0, startedAt(inbox, 100, ""))
	mustAppend(t, s, "x", 0, startedAt("x", 50, ""))
	assertCatalog(t, c, store.CatalogQuery{}, catalogEntry("x", "", store.CatalogRunning, 50, 50))
	assertCatalog(t, c, store.CatalogQuery{Prefix: store.InboxStreamPrefix})
	assertCounts(t, c, store.CatalogQuery{}, store.CatalogCounts{"running": 1})
}

// fork: a copy of a prefix has the entry of that prefix under its own id.
func (k catalogKit) fork(t *testing.T) {
	s, c := k.open(t)
	cp, ok := s.(store.PrefixCopier)
	if !ok {
		t.Skip("storetest: the store is not a store.PrefixCopier")
	}
	mustAppend(t, s, "src", 0, startedAt("src", 100, `{"tenant":"acme"}`, event.ExecutionSuspended, event.ExecutionResumed, event.ExecutionCompleted))
	ctx := context.Background()
	if err := cp.CopyPrefix(ctx, "src", "fork-1", 1); err != nil {
		t.Fatalf("CopyPrefix: %v", err)
	}
	if err := cp.CopyPrefix(ctx, "src", "fork-0", 0); err != nil {
		t.Fatalf("CopyPrefix: %v", err)
	}
	assertCatalog(t, c, store.CatalogQuery{},
		catalogEntry("fork-0", "acme", store.CatalogRunning, 100, 100),
		catalogEntry("fork-1", "acme", store.CatalogSuspended, 100, 101),
		catalogEntry("src", "acme", store.CatalogCompleted, 100, 103))
	before, counts := snapshotOf(t, c)
	if err := cp.CopyPrefix(ctx, "src", "fork-1", 2); err == nil {
		t.Fatal("CopyPrefix onto an existing log was accepted")
	}
	if after, countsAfter := snapshotOf(t, c); !slices.Equal(before, after) || fmt.Sprint(counts) != fmt.Sprint(countsAfter) {
		t.Fatalf("a refused CopyPrefix changed the catalog:\n before %+v\n after  %+v", before, after)
	}
}

// deleteExecution: a deleted log has no entry; one appended again under
// its id has the entry of its new first event.
func (k catalogKit) deleteExecution(t *testing.T) {
	s, c := k.open(t)
	d, ok := s.(store.ExecutionDeleter)
	if !ok {
		t.Skip("storetest: the store is not a store.ExecutionDeleter")
	}
	mustAppend(t, s, "gone", 0, startedAt("gone", 100, "", event.ExecutionCompleted))
	mustAppend(t, s, "kept", 0, startedAt("kept", 50, ""))
	ctx := context.Background()
	if err := d.DeleteExecution(ctx, "gone"); err != nil {
		t.Fatalf("DeleteExecution: %v", err)
	}
	assertCatalog(t, c, store.CatalogQuery{}, catalogEntry("kept", "", store.CatalogRunning, 50, 50))
	assertCounts(t, c, store.CatalogQuery{}, store.CatalogCounts{"running": 1})
	mustAppend(t, s, "gone", 0, startedAt("gone", 10, `{"tenant":"acme"}`, event.ExecutionSuspended))
	assertCatalog(t, c, store.CatalogQuery{},
		catalogEntry("kept", "", store.CatalogRunning, 50, 50),
		catalogEntry("gone", "acme", store.CatalogSuspended, 10, 11))
}

// concurrent: executions created and moved by concurrent appenders are
// each cataloged once, at their last status.
func (k catalogKit) concurrent(t *testing.T) {
	s, c := k.open(t)
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := "c" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				evs := startedAt(id, int64(100+i), "", event.ExecutionSuspended, event.ExecutionResumed)
				if err := s.Append(context.Background(), id, 0, evs[:2]); err != nil {
					errs <- err
					return
				}
				if err := s.Append(context.Background(), id, 2, evs[2:]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a concurrent append: %v", err)
	}
	var want []store.CatalogEntry
	for i := each - 1; i >= 0; i-- {
		for w := range writers {
			id := "c" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
			want = append(want, catalogEntry(id, "", store.CatalogRunning, int64(100+i), int64(102+i)))
		}
	}
	slices.SortStableFunc(want, func(a, b store.CatalogEntry) int {
		if store.CatalogBefore(a.StartedAt, a.ExecutionID, b.StartedAt, b.ExecutionID) {
			return -1
		}
		return 1
	})
	assertCatalog(t, c, store.CatalogQuery{}, want...)
	assertCounts(t, c, store.CatalogQuery{}, store.CatalogCounts{"running": writers * each})
}

// agreesWithFold: on seeded logs of every shape, appended in batches of
// every size, each entry's status is what folding its log says.
func (k catalogKit) agreesWithFold(t *testing.T) {
	for _, seed := range statusSeeds {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			s, _ := k.open(t)
			logs := StatusLogs(seed)
			AppendLogs(t, s, logs, seed)
			CheckCatalog(t, s, logs)
		})
	}
}

// CatalogEntriesOf is the catalog that logs, by execution id, must give:
// the entry of each log but an inbox stream's, its status by folding the
// log (which the rule of store.CatalogStatusOf agrees with on every log
// the kernel writes), in search order.
func CatalogEntriesOf(logs map[string][]event.Envelope) []store.CatalogEntry {
	var out []store.CatalogEntry
	for id, evs := range logs { //loom:order-independent sorted below
		if store.IsInboxStream(id) || len(evs) == 0 {
			continue
		}
		e := store.EntryOf(id, evs[0]).Apply(store.CatalogChangeOf(evs))
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b store.CatalogEntry) int {
		if store.CatalogBefore(a.StartedAt, a.ExecutionID, b.StartedAt, b.ExecutionID) {
			return -1
		}
		return 1
	})
	return out
}

// CheckCatalog fails t unless the ExecutionCatalog of s holds exactly the
// entries CatalogEntriesOf(logs) gives, each with the status folding its
// log gives, and counts them so. Stores use it to test a catalog built by a
// migration from logs written before it.
func CheckCatalog(t *testing.T, s store.EventStore, logs map[string][]event.Envelope) {
	t.Helper()
	c := catalogOf(t, s)
	want := CatalogEntriesOf(logs)
	counts := store.CatalogCounts{}
	for _, e := range want {
		st, err := fold.FoldChecked(fold.Initial(), logs[e.ExecutionID])
		if err != nil {
			t.Fatalf("storetest: folding the seeded log of %q: %v", e.ExecutionID, err)
		}
		if string(st.Status) != string(e.Status) {
			t.Fatalf("storetest: the catalog's rule gives %q status %q, the fold %q", e.ExecutionID, e.Status, st.Status)
		}
		counts[e.Status]++
	}
	got := searchAll(t, c, store.CatalogQuery{}, 7)
	if !slices.Equal(got, want) {
		t.Fatalf("the catalog disagrees with the logs:\n got  %+v\n want %+v", got, want)
	}
	assertCounts(t, c, store.CatalogQuery{}, counts)
}

// closed: every method refuses with store.ErrClosed once the store is
// closed.
func (k catalogKit) closed(t *testing.T) {
	s, c := k.open(t)
	mustAppend(t, s, "x", 0, startedAt("x", 1, ""))
	closeStore(t, s)
	if _, err := c.SearchExecutions(context.Background(), store.CatalogQuery{}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("SearchExecutions after Close: %v, want store.ErrClosed", err)
	}
	if _, err := c.CountExecutions(context.Background(), store.CatalogQuery{}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("CountExecutions after Close: %v, want store.ErrClosed", err)
	}
}

// reopen: the catalog is durable with the log it indexes.
func (k catalogKit) reopen(t *testing.T) {
	s := k.f.New(t)
	mustAppend(t, s, "a", 0, startedAt("a", 100, `{"tenant":"acme"}`, event.ExecutionSuspended))
	mustAppend(t, s, "b", 0, startedAt("b", 200, ""))
	mustAppend(t, s, "b", 1, lifecycle("b", 1, event.ExecutionCompleted))
	want, counts := snapshotOf(t, catalogOf(t, s))
	closeStore(t, s)
	again := openStore(t, "EventStoreFactory.Reopen", func(t *testing.T) store.EventStore { return k.f.Reopen(t, s) })
	got, countsAgain := snapshotOf(t, catalogOf(t, again))
	if !slices.Equal(got, want) || fmt.Sprint(counts) != fmt.Sprint(countsAgain) {
		t.Fatalf("after a reopen the catalog is\n %+v %v\nwant\n %+v %v", got, countsAgain, want, counts)
	}
}

// CatalogLogs is StatusLogs(seed) — logs of every status, an
// unstamped CONTINUED and an inbox stream among them — with starts spread
// over nine instants (so the order has ties), plus logs started by
// principals of every shape store.TenantOf reads.
func CatalogLogs(seed uint64) map[string][]event.Envelope {
	logs := StatusLogs(seed)
	started := func(id, payload string, types ...string) {
		var evs []event.Envelope
		for i, typ := range append([]string{event.ExecutionStarted}, types...) {
			evs = append(evs, event.Envelope{ID: fmt.Sprintf("%s#%d", id, i), WorkflowID: "wf-tenants", ExecutionID: id,
				Type: typ, Sequence: int64(i), Timestamp: 1_700_000_000_000 + int64(i), Payload: json.RawMessage(`{}`)})
		}
		evs[0].Payload = json.RawMessage(payload)
		logs[id] = evs
	}
	started("t-acme", `{"input":{"n":1},"principal":{"tenant":"acme","subject":"u1"}}`, event.ExecutionSuspended)
	started("t-bolt", `{"principal":{"subject":"u2","tenant":"bolt"}}`, event.ExecutionCompleted)
	started("t-escaped", `{"\u0070rincipal":{"tena\u006et":"acme"}}`)
	started("t-case", `{"principal":{"Tenant":"acme"}}`, event.ExecutionFailed)
	started("t-not-object", `{"principal":"acme"}`)
	started("t-number", `{"principal":{"tenant":7}}`)
	started("t-dup-tenant", `{"principal":{"tenant":"acme","tenant":"bolt"}}`)
	started("t-dup-principal", `{"principal":{"tenant":"acme"},"principal":{"tenant":"bolt"}}`)
	started("t-late", `{"input":null}`)
	late := logs["t-late"]
	late[0].Type = "STEP_DONE" // a first event that is no start names no tenant, whatever follows
	logs["t-late"] = append(late, event.Envelope{ID: "t-late#1", WorkflowID: "wf-tenants", ExecutionID: "t-late",
		Type: event.ExecutionStarted, Sequence: 1, Timestamp: late[0].Timestamp + 1, Payload: json.RawMessage(`{"principal":{"tenant":"acme"}}`)})
	for i, id := range slices.Sorted(maps.Keys(logs)) {
		for j := range logs[id] {
			logs[id][j].Timestamp += int64(i%9) * 1000
		}
	}
	return logs
}

// SearchCatalog pages through every entry q selects in c, pageSize at a
// time, checking the paging contract on the way (RunExecutionCatalog's
// rules: the order kept across pages, Next the cursor of each page's last
// entry and "" only on the last page).
func SearchCatalog(t *testing.T, c store.ExecutionCatalog, q store.CatalogQuery, pageSize int) []store.CatalogEntry {
	t.Helper()
	all := searchAll(t, c, q, pageSize)
	if all == nil {
		all = []store.CatalogEntry{}
	}
	return all
}

// WantCatalog is what the kit's rule (CatalogEntriesOf) gives logs for
// q, and its counts.
func WantCatalog(logs map[string][]event.Envelope, q store.CatalogQuery) ([]store.CatalogEntry, store.CatalogCounts) {
	want := []store.CatalogEntry{}
	counts := store.CatalogCounts{}
	counted := q // a count ignores the status
	counted.Status = ""
	for _, e := range CatalogEntriesOf(logs) {
		if q.Matches(e) {
			want = append(want, e)
		}
		if counted.Matches(e) {
			counts[e.Status]++
		}
	}
	return want, counts
}

// CatalogSearches are the searches CheckCatalogSearches compares.
var CatalogSearches = []store.CatalogQuery{
	{}, {Tenant: "acme"}, {Tenant: "bolt"}, {WorkflowID: "wf-tenants"}, {Prefix: "s-"}, {Prefix: "gen-0"}, {Prefix: "s-日"},
	{Status: store.CatalogPending}, {Status: store.CatalogRunning}, {Status: store.CatalogSuspended},
	{Status: store.CatalogCompleted}, {Status: store.CatalogFailed}, {Status: store.CatalogCancelled},
	{Status: store.CatalogContinued}, {Status: store.CatalogRunning, Tenant: "acme", Prefix: "t-"},
}

// CheckCatalogSearches fails t unless every query of CatalogSearches finds
// in c what the kit's rule gives logs, and counts it so: stores use it to
// test a catalog a migration built.
func CheckCatalogSearches(t *testing.T, c store.ExecutionCatalog, logs map[string][]event.Envelope) {
	t.Helper()
	for _, q := range CatalogSearches {
		want, counts := WantCatalog(logs, q)
		if got := SearchCatalog(t, c, q, 7); !slices.Equal(got, want) {
			t.Fatalf("SearchExecutions(%+v):\n got  %+v\n want %+v", q, got, want)
		}
		got, err := c.CountExecutions(context.Background(), q)
		if err != nil || !maps.Equal(got, counts) {
			t.Fatalf("CountExecutions(%+v) = %v, %v; want %v", q, got, err, counts)
		}
	}
}
