package crypto_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// indexedStores is a sealing event store whose SubjectIndex lives in a
// store of its own, as the index requires.
type indexedStores struct {
	events *crypto.EventStore
	inner  crypto.InnerEventStore
	index  *crypto.LogSubjectIndex
}

// indexBackends opens the inner store and the index's store, each fresh,
// over memstore and over two SQLite files.
var indexBackends = map[string]func(t *testing.T) (inner crypto.InnerEventStore, index store.EventStore){
	"memstore": func(t *testing.T) (crypto.InnerEventStore, store.EventStore) {
		return memstore.NewEventStore(), memstore.NewEventStore()
	},
	"sqlite": func(t *testing.T) (crypto.InnerEventStore, store.EventStore) {
		dir := t.TempDir()
		inner, err := sqlite.OpenEventStore(filepath.Join(dir, "loom.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = inner.Close() }) // a test may have closed it through the wrapper
		index, err := sqlite.OpenEventStore(filepath.Join(dir, "subjects.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := index.Close(); err != nil {
				t.Error(err)
			}
		})
		return inner, index
	},
}

// forEachIndexBackend runs f over every backend in a name order.
func forEachIndexBackend(t *testing.T, f func(t *testing.T, s indexedStores)) {
	names := make([]string, 0, len(indexBackends))
	for name := range indexBackends { //loom:sorted sorted below
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			inner, indexStore := indexBackends[name](t)
			f(t, openIndexed(t, inner, indexStore))
		})
	}
}

func openIndexed(t *testing.T, inner crypto.InnerEventStore, indexStore store.EventStore) indexedStores {
	t.Helper()
	ix, err := crypto.NewLogSubjectIndex(indexStore)
	if err != nil {
		t.Fatal(err)
	}
	events := wrapEvents(t, inner, openKeys(t, t.TempDir()),
		crypto.EventStoreOptions{Subject: crypto.SubjectFromInput("user"), Index: ix})
	return indexedStores{events: events, inner: inner, index: ix}
}

// started is a one-event log of exec started by user ("" for no user).
func started(exec, user string) []event.Envelope {
	in := `{"input":{"n":1}}`
	if user != "" {
		in = `{"input":{"user":"` + user + `","ssn":"SECRET-` + exec + `"}}`
	}
	return []event.Envelope{env(exec, 0, event.ExecutionStarted, in)}
}

func mustAppend(t testing.TB, s store.EventStore, exec string, expected int64, evs []event.Envelope) {
	t.Helper()
	if err := s.Append(context.Background(), exec, expected, evs); err != nil {
		t.Fatalf("append %s@%d: %v", exec, expected, err)
	}
}

// With an index, erasure and export find exactly the subject's
// executions — its own, its fork — and drop the index's phantoms: an id
// with no log, and an id whose log records another subject.
func TestSubjectIndexErasureAndExportFindExactlyTheSubjectsExecutions(t *testing.T) {
	forEachIndexBackend(t, func(t *testing.T, s indexedStores) {
		ctx := context.Background()
		mustAppend(t, s.events, "x", 0, sampleLog("x"))
		mustAppend(t, s.events, "z", 0, started("z", "u1"))
		mustAppend(t, s.events, "y", 0, started("y", "u2"))
		mustAppend(t, s.events, "plain", 0, started("plain", ""))
		if err := s.events.CopyPrefix(ctx, "x", "x-fork", 2); err != nil {
			t.Fatal(err)
		}
		if err := s.index.Add(ctx, "u1", "ghost"); err != nil {
			t.Fatal(err)
		}
		if err := s.index.Add(ctx, "u1", "y"); err != nil {
			t.Fatal(err)
		}
		held, err := s.index.Executions(ctx, "u1")
		if want := []string{"ghost", "x", "x-fork", "y", "z"}; err != nil || !reflect.DeepEqual(held, want) {
			t.Fatalf("the index holds %v, %v; want %v", held, err, want)
		}
		want := []string{"x", "x-fork", "z"}
		if got, err := s.events.ExecutionsOf(ctx, "u1"); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("ExecutionsOf(u1) = %v, %v; want %v", got, err, want)
		}
		exp, err := s.events.ExportSubject(ctx, "u1", nil)
		if err != nil {
			t.Fatal(err)
		}
		var exported []string
		for _, h := range exp.Executions {
			exported = append(exported, h.ExecutionID)
		}
		if !reflect.DeepEqual(exported, want) {
			t.Fatalf("ExportSubject(u1) exported %v, want %v", exported, want)
		}
		if len(exp.Executions[0].Events) != len(sampleLog("x")) {
			t.Fatalf("x exported %d events, want its whole log", len(exp.Executions[0].Events))
		}
		erasure, err := s.events.EraseSubject(ctx, "u1")
		if err != nil || !reflect.DeepEqual(erasure.Executions, want) {
			t.Fatalf("EraseSubject(u1) = %v, %v; want %v", erasure.Executions, err, want)
		}
		if got, err := s.events.ExecutionsOf(ctx, "u2"); err != nil || !reflect.DeepEqual(got, []string{"y"}) {
			t.Fatalf("ExecutionsOf(u2) = %v, %v", got, err)
		}
		// "" (the unsealed executions) is never indexed: it stays a scan.
		if got, err := s.events.ExecutionsOf(ctx, ""); err != nil || !reflect.DeepEqual(got, []string{"plain"}) {
			t.Fatalf("ExecutionsOf(\"\") = %v, %v", got, err)
		}
	})
}

// A deleted execution, and one recreated under another subject, leave
// entries behind that ExecutionsOf drops.
func TestSubjectIndexDropsDeletedAndRecreatedExecutions(t *testing.T) {
	forEachIndexBackend(t, func(t *testing.T, s indexedStores) {
		ctx := context.Background()
		mustAppend(t, s.events, "gone", 0, started("gone", "u1"))
		mustAppend(t, s.events, "moved", 0, started("moved", "u1"))
		for _, id := range []string{"gone", "moved"} {
			if err := s.events.DeleteExecution(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		mustAppend(t, s.events, "moved", 0, started("moved", "u2"))
		if got, err := s.events.ExecutionsOf(ctx, "u1"); err != nil || len(got) != 0 {
			t.Fatalf("ExecutionsOf(u1) = %v, %v; want none", got, err)
		}
		if got, err := s.events.ExecutionsOf(ctx, "u2"); err != nil || !reflect.DeepEqual(got, []string{"moved"}) {
			t.Fatalf("ExecutionsOf(u2) = %v, %v", got, err)
		}
	})
}

// Many executions started at once under one subject are all indexed: the
// Adds race on one stream and every conflict is retried, none lost.
func TestSubjectIndexConcurrentStartsLoseNoAdd(t *testing.T) {
	const n = 48
	forEachIndexBackend(t, func(t *testing.T, s indexedStores) {
		ctx := context.Background()
		var want []string
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := range n {
			id := fmt.Sprintf("exec-%02d", i)
			want = append(want, id)
			wg.Go(func() { errs <- s.events.Append(ctx, id, 0, started(id, "u1")) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.index.Executions(ctx, "u1"); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("the index holds %v, %v; want all %d", got, err, n)
		}
		if got, err := s.events.ExecutionsOf(ctx, "u1"); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("ExecutionsOf(u1) = %v, %v; want all %d", got, err, n)
		}
	})
}

// Concurrent Adds of one subject through two indexes over one store (two
// processes) conflict on the stream's sequence, and every one lands.
func TestLogSubjectIndexConcurrentAddsFromTwoIndexes(t *testing.T) {
	const n = 32
	shared := memstore.NewEventStore()
	a, errA := crypto.NewLogSubjectIndex(shared)
	b, errB := crypto.NewLogSubjectIndex(shared)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	ctx := context.Background()
	errs := make(chan error, 2*n)
	var wg sync.WaitGroup
	var want []string
	for i := range n {
		for side, ix := range []*crypto.LogSubjectIndex{a, b} {
			id := fmt.Sprintf("e-%d-%02d", side, i)
			want = append(want, id)
			wg.Go(func() { errs <- ix.Add(ctx, "u1", id) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	for _, ix := range []*crypto.LogSubjectIndex{a, b} {
		if got, err := ix.Executions(ctx, "u1"); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Executions(u1) = %v, %v; want all %d", len(got), err, 2*n)
		}
	}
	raw, err := shared.ReadFrom(ctx, crypto.SubjectIndexStream("u1"), 0)
	if err != nil || len(raw) != 2*n {
		t.Fatalf("the stream holds %d entries, %v; want one per Add", len(raw), err)
	}
}

// refusingStore refuses every Append while refuse is set.
type refusingStore struct {
	*memstore.EventStore
	refuse atomic.Bool
}

var errRefusedByTest = errors.New("test: append refused")

func (r *refusingStore) Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error {
	if r.refuse.Load() {
		return errRefusedByTest
	}
	return r.EventStore.Append(ctx, executionID, expected, events)
}

// An Add that fails refuses the execution's first append, and a fork,
// with its error, and nothing reaches the inner store; appends that need
// no Add (later ones, unsealed executions) go on.
func TestSubjectIndexAddFailureRefusesTheFirstAppend(t *testing.T) {
	ctx := context.Background()
	indexStore := &refusingStore{EventStore: memstore.NewEventStore()}
	inner := memstore.NewEventStore()
	s := openIndexed(t, inner, indexStore)
	log := sampleLog("x")
	mustAppend(t, s.events, "x", 0, log[:2])
	indexStore.refuse.Store(true)

	for _, first := range []func() error{
		func() error { return s.events.Append(ctx, "new", 0, started("new", "u1")) },
		func() error { return s.events.AppendFenced(ctx, "new", 0, 0, started("new", "u1")) },
		func() error { return s.events.CopyPrefix(ctx, "x", "new", 1) },
	} {
		if err := first(); !errors.Is(err, errRefusedByTest) {
			t.Fatalf("a first write with a failing index = %v, want its error", err)
		}
		if evs, err := inner.ReadFrom(ctx, "new", 0); err != nil || len(evs) != 0 {
			t.Fatalf("the refused write left %d events, %v", len(evs), err)
		}
	}
	page, err := inner.ListExecutions(ctx, "", 10)
	if err != nil || len(page.Executions) != 1 || page.Executions[0].ExecutionID != "x" {
		t.Fatalf("the inner store lists %+v, %v; want x alone", page.Executions, err)
	}
	mustAppend(t, s.events, "x", 2, log[2:])
	mustAppend(t, s.events, "plain", 0, started("plain", ""))
}

// countingStore counts the reads of each execution.
type countingStore struct {
	*memstore.EventStore
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingStore) count(executionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads[executionID]++
}

func (c *countingStore) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	c.count(executionID)
	return c.EventStore.ReadFrom(ctx, executionID, from)
}

func (c *countingStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	c.count(executionID)
	return c.EventStore.ReadRange(ctx, executionID, from, to)
}

// taken returns the reads counted since the last call, sorted, and resets.
func (c *countingStore) taken() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.reads))
	for id := range c.reads { //loom:sorted sorted below
		out = append(out, id)
	}
	slices.Sort(out)
	c.reads = map[string]int{}
	return out
}

// With an index, ExecutionsOf reads the log of the ids the index holds for
// the subject and of no other execution: 1,000 unrelated ones cost
// nothing. The same inner store without an index scans them all (the
// counter can fail) and answers the same.
func TestExecutionsOfWithAnIndexReadsNoUnrelatedExecution(t *testing.T) {
	const unrelated = 1000
	ctx := context.Background()
	inner := &countingStore{EventStore: memstore.NewEventStore(), reads: map[string]int{}}
	s := openIndexed(t, inner, memstore.NewEventStore())
	for i := range unrelated {
		id := fmt.Sprintf("other-%04d", i)
		user := "u2"
		if i%2 == 0 {
			user = "" // unsealed
		}
		mustAppend(t, s.events, id, 0, started(id, user))
	}
	for _, id := range []string{"a", "m", "zz"} {
		mustAppend(t, s.events, id, 0, started(id, "u1"))
	}
	if err := s.index.Add(ctx, "u1", "ghost"); err != nil {
		t.Fatal(err)
	}
	inner.taken()
	want := []string{"a", "m", "zz"}
	if got, err := s.events.ExecutionsOf(ctx, "u1"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ExecutionsOf(u1) = %v, %v; want %v", got, err, want)
	}
	if read := inner.taken(); !reflect.DeepEqual(read, []string{"a", "ghost", "m", "zz"}) {
		t.Fatalf("ExecutionsOf read the logs of %d executions (%v…), want only the indexed ones", len(read), read[:min(len(read), 5)])
	}

	scan := wrapEvents(t, inner, openKeys(t, t.TempDir()), crypto.EventStoreOptions{Subject: crypto.SubjectFromInput("user")})
	if got, err := scan.ExecutionsOf(ctx, "u1"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("the scan found %v, %v; want %v", got, err, want)
	}
	if read := inner.taken(); len(read) != unrelated+len(want) {
		t.Fatalf("the scan read %d logs, want every one (%d)", len(read), unrelated+len(want))
	}
}

// Through the runtime, an index over its own SQLite file indexes each
// start (not the inbox streams) and the export finds the same executions
// the scan does.
func TestSubjectIndexUnderTheRuntime(t *testing.T) {
	dir := t.TempDir()
	indexStore, err := sqlite.OpenEventStore(filepath.Join(dir, "subjects.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := indexStore.Close(); err != nil {
			t.Error(err)
		}
	})
	ix, err := crypto.NewLogSubjectIndex(indexStore)
	if err != nil {
		t.Fatal(err)
	}
	s := openSealedSQLiteIndexed(t, dir, ix)
	done, parked, mail := runKYC(t, newRuntime(t, s))
	ctx := context.Background()
	want := []string{done, parked, mail}
	if held, err := ix.Executions(ctx, "user-7"); err != nil || !reflect.DeepEqual(held, want) {
		t.Fatalf("the index holds %v, %v; want %v", held, err, want)
	}
	exp, err := s.events.ExportSubject(ctx, "user-7", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range exp.Executions {
		ids = append(ids, h.ExecutionID)
	}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("exported %v, want %v", ids, want)
	}
}

// The index's own contract: ids deduplicated and sorted, subjects kept
// apart, any subject's stream id of one fixed length, refusals typed.
func TestLogSubjectIndexContract(t *testing.T) {
	ctx := context.Background()
	raw := memstore.NewEventStore()
	ix, err := crypto.NewLogSubjectIndex(raw)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", event.MaxIDBytes/2) // 512 bytes, no id left for a prefix
	for _, add := range [][2]string{{"u1", "b"}, {"u1", "a"}, {"u1", "b"}, {"u2", "c"}, {long, "d"}} {
		if err := ix.Add(ctx, add[0], add[1]); err != nil {
			t.Fatalf("Add(%.10q, %q): %v", add[0], add[1], err)
		}
	}
	for subject, want := range map[string][]string{"u1": {"a", "b"}, "u2": {"c"}, long: {"d"}, "nobody": {}} {
		if got, err := ix.Executions(ctx, subject); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Executions(%.10q) = %v, %v; want %v", subject, got, err, want)
		}
	}
	page, err := raw.ListExecutions(ctx, "", 10)
	if err != nil || len(page.Executions) != 3 {
		t.Fatalf("the index's store lists %+v, %v; want one stream per subject", page.Executions, err)
	}
	for _, info := range page.Executions {
		if !strings.HasPrefix(info.ExecutionID, crypto.SubjectIndexStreamPrefix) || len(info.ExecutionID) != len(crypto.SubjectIndexStreamPrefix)+64 {
			t.Fatalf("stream id %q is not the prefix and a SHA-256", info.ExecutionID)
		}
	}
	evs, err := raw.ReadFrom(ctx, crypto.SubjectIndexStream("u1"), 0)
	if err != nil || len(evs) != 3 || evs[1].Type != crypto.SubjectIndexEntryType || string(evs[1].Payload) != `{"executionId":"a"}` ||
		evs[1].ID != crypto.SubjectIndexStream("u1")+":1" || evs[1].Timestamp != 0 {
		t.Fatalf("u1's stream = %+v, %v", evs, err)
	}

	if err := ix.Add(ctx, "", "a"); !errors.Is(err, crypto.ErrInvalidSubject) {
		t.Fatalf("Add with an empty subject = %v, want ErrInvalidSubject", err)
	}
	if err := ix.Add(ctx, "u1", "a\x00"); err == nil {
		t.Fatal("Add of an invalid execution id accepted")
	}
	if _, err := ix.Executions(ctx, ""); !errors.Is(err, crypto.ErrInvalidSubject) {
		t.Fatalf("Executions of an empty subject = %v, want ErrInvalidSubject", err)
	}
	bad := crypto.SubjectIndexStream("u3")
	mustAppend(t, raw, bad, 0, []event.Envelope{{ID: "x", ExecutionID: bad, Type: "OTHER", Payload: json.RawMessage(`{}`)}})
	if _, err := ix.Executions(ctx, "u3"); err == nil {
		t.Fatal("a stream entry of another type was read as an index entry")
	}
	if _, err := crypto.NewLogSubjectIndex(nil); err == nil {
		t.Fatal("NewLogSubjectIndex(nil) accepted")
	}
}

// conflictingStore refuses every Append with a sequence conflict, counting.
type conflictingStore struct {
	*memstore.EventStore
	appends atomic.Int64
}

func (c *conflictingStore) Append(_ context.Context, executionID string, expected int64, _ []event.Envelope) error {
	c.appends.Add(1)
	return &store.SequenceConflictError{ExecutionID: executionID, Expected: expected, Actual: expected + 1}
}

// An Add that keeps losing its sequence gives up after
// MaxSubjectIndexAttempts with a typed error.
func TestLogSubjectIndexAddGivesUpAfterMaxAttempts(t *testing.T) {
	cs := &conflictingStore{EventStore: memstore.NewEventStore()}
	ix, err := crypto.NewLogSubjectIndex(cs)
	if err != nil {
		t.Fatal(err)
	}
	err = ix.Add(context.Background(), "u1", "a")
	var ce *crypto.SubjectIndexContendedError
	if !errors.As(err, &ce) || !errors.Is(err, crypto.ErrSubjectIndexContended) || !errors.Is(err, store.ErrSequenceConflict) {
		t.Fatalf("Add = %v, want *SubjectIndexContendedError wrapping a sequence conflict", err)
	}
	if got := cs.appends.Load(); got != crypto.MaxSubjectIndexAttempts || ce.Attempts != crypto.MaxSubjectIndexAttempts {
		t.Fatalf("Add tried %d appends (error says %d), want %d", got, ce.Attempts, crypto.MaxSubjectIndexAttempts)
	}
	if strings.Contains(err.Error(), "u1") {
		t.Fatalf("the error echoes the subject: %v", err)
	}
}

// A LogSubjectIndex kept in the store it indexes is refused.
func TestNewEventStoreRefusesAnIndexInItsOwnStore(t *testing.T) {
	inner := memstore.NewEventStore()
	ix, err := crypto.NewLogSubjectIndex(inner)
	if err != nil {
		t.Fatal(err)
	}
	_, err = crypto.NewEventStore(inner, openKeys(t, t.TempDir()), crypto.EventStoreOptions{Subject: crypto.FixedSubject("s"), Index: ix})
	if err == nil {
		t.Fatal("an index in the kernel's own store accepted")
	}
}

// A stale length hint (another index appended; the stream was deleted
// behind it) costs a conflict and a re-read, never a lost or misplaced
// entry.
func TestLogSubjectIndexRetriesAStaleLength(t *testing.T) {
	ctx := context.Background()
	shared := memstore.NewEventStore()
	a, errA := crypto.NewLogSubjectIndex(shared)
	b, errB := crypto.NewLogSubjectIndex(shared)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	for _, step := range []struct {
		ix *crypto.LogSubjectIndex
		id string
	}{{a, "1"}, {b, "2"}, {a, "3"}, {b, "4"}} {
		if err := step.ix.Add(ctx, "u1", step.id); err != nil {
			t.Fatalf("Add(%s): %v", step.id, err)
		}
	}
	if got, err := a.Executions(ctx, "u1"); err != nil || !reflect.DeepEqual(got, []string{"1", "2", "3", "4"}) {
		t.Fatalf("Executions = %v, %v", got, err)
	}
	stream := crypto.SubjectIndexStream("u1")
	if err := shared.DeleteExecution(ctx, stream); err != nil {
		t.Fatal(err)
	}
	if err := a.Add(ctx, "u1", "5"); err != nil {
		t.Fatalf("Add after the stream shrank behind the hint: %v", err)
	}
	evs, err := shared.ReadFrom(ctx, stream, 0)
	if err != nil || len(evs) != 1 || evs[0].Sequence != 0 || string(evs[0].Payload) != `{"executionId":"5"}` {
		t.Fatalf("the stream after a re-read = %+v, %v", evs, err)
	}
}
