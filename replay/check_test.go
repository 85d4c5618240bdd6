package replay_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/testbin"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/replay"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// orderFlow runs steps, parks on gate "ok" unless the input is "auto",
// then runs "ship". Each step counts its runs in runs.
func orderFlow(runs *atomic.Int64, steps ...string) *loom.Flow {
	step := func(id string) *loom.Step[string, string] {
		return loom.NewStep(id, func(_ context.Context, in string) (string, error) {
			runs.Add(1)
			return in + "+" + id, nil
		})
	}
	return loom.NewFlow("order", func(ctx *loom.Context, in string) (string, error) {
		out := in
		for _, id := range steps {
			var err error
			if out, err = loom.Run(ctx, step(id), out); err != nil {
				return "", err
			}
		}
		if in != "auto" {
			if _, err := ctx.Suspend("ok"); err != nil {
				return "", err
			}
		}
		return loom.Run(ctx, step("ship"), out)
	})
}

// populate starts parked executions p-0..p-(parked-1) and ended ones
// e-0..e-(ended-1) under the flow of steps on cfg's stores.
func populate(t testing.TB, cfg loom.Config, parked, ended int, steps ...string) {
	t.Helper()
	ctx := context.Background()
	var runs atomic.Int64
	cfg.Flows = []*loom.Flow{orderFlow(&runs, steps...)}
	cfg.Recovery.Disabled = true
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for i := range parked + ended {
		id, in := "p-"+itoa(i), "x"
		if i >= parked {
			id, in = "e-"+itoa(i-parked), "auto"
		}
		if _, err := rt.Start(ctx, "order", in, loom.WithExecutionID(id)); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForSettled(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func candidate(runs *atomic.Int64, steps ...string) loom.Config {
	return loom.Config{Flows: []*loom.Flow{orderFlow(runs, steps...)}}
}

func TestCheckReportsInFlightExecutionsAndASampleOfEndedOnes(t *testing.T) {
	ctx := context.Background()
	events := memstore.NewEventStore()
	populate(t, loom.Config{Events: events}, 3, 4, "a", "b")
	var runs atomic.Int64

	rep, err := replay.Check(ctx, events, candidate(&runs, "a", "b"), replay.Options{})
	if err != nil || !rep.OK() || rep.Checked != 3 || rep.Compatible != 3 {
		t.Fatalf("unchanged: %+v %v", rep, err)
	}
	for _, x := range rep.Executions {
		if !strings.HasPrefix(x.ExecutionID, "p-") {
			t.Fatalf("an ended execution was checked without Ended: %s", x)
		}
	}

	rep, err = replay.Check(ctx, events, candidate(&runs, "a", "b2"), replay.Options{Ended: -1})
	if err != nil || rep.OK() || rep.Checked != 7 || rep.ByVerdict[loom.ReplayDiverged] != 7 {
		t.Fatalf("renamed, all ended too: %+v %v", rep, err)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), `diverged at sequence 3: expected step "b", got step "b2"`) ||
		!strings.HasSuffix(text.String(), "checked 7 executions against order: 0 compatible, 7 incompatible (7 diverged)\n") {
		t.Fatalf("text:\n%s", text.String())
	}

	sample := func(seed uint64) []string {
		rep, err := replay.Check(ctx, events, candidate(&runs, "a", "b"), replay.Options{Ended: 2, Seed: seed})
		if err != nil || rep.Checked != 5 {
			t.Fatalf("sample: %+v %v", rep, err)
		}
		var ids []string
		for _, x := range rep.Executions {
			ids = append(ids, x.ExecutionID)
		}
		return ids
	}
	if a, b := sample(7), sample(7); strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("the same seed sampled %v then %v", a, b)
	}

	rep, err = replay.Check(ctx, events, candidate(&runs, "a", "b"), replay.Options{Executions: []string{"e-1", "p-0", "e-1"}})
	if err != nil || rep.Checked != 2 || !rep.OK() {
		t.Fatalf("by id: %+v %v", rep, err)
	}
	if runs.Load() != 0 {
		t.Fatalf("the checks ran %d steps", runs.Load())
	}
}

// The checker never writes to the store it reads: a SQLite file opened
// read-only, whose directory's checksums are the same before and after.
func TestCheckNeverWritesTheStoreItReads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.db")
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	populate(t, loom.Config{Storage: st}, 4, 2, "a", "b")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	before := testbin.DirSums(t, dir)
	ro, err := sqlite.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	for _, steps := range [][]string{{"a", "b"}, {"a", "n", "b"}} {
		rep, err := replay.Check(context.Background(), ro.EventStore(), candidate(&runs, steps...), replay.Options{Ended: -1})
		if err != nil || rep.Checked != 6 {
			t.Fatalf("%v: %+v %v", steps, rep, err)
		}
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	testbin.SameSums(t, "replay.Check", before, testbin.DirSums(t, dir))
	if runs.Load() != 0 {
		t.Fatalf("the checks ran %d steps", runs.Load())
	}
}

// failingReads is a store whose reads of one execution fail.
type failingReads struct {
	store.EventStore
	bad string
}

var errDisk = errors.New("disk on fire")

func (f failingReads) ReadFrom(ctx context.Context, id string, from int64) ([]event.Envelope, error) {
	if id == f.bad {
		return nil, errDisk
	}
	return f.EventStore.ReadFrom(ctx, id, from)
}

func TestCheckRefusesWhatItCannotCheck(t *testing.T) {
	ctx := context.Background()
	var runs atomic.Int64
	if _, err := replay.Check(ctx, nil, candidate(&runs, "a"), replay.Options{}); err == nil ||
		!strings.Contains(err.Error(), "no store to check") {
		t.Fatalf("no store: %v", err)
	}
	events := memstore.NewEventStore()
	populate(t, loom.Config{Events: events}, 2, 0, "a")
	var ce *replay.CandidateError
	if _, err := replay.Check(ctx, events, loom.Config{}, replay.Options{}); !errors.As(err, &ce) {
		t.Fatalf("no flows: %v", err)
	}
	if _, err := replay.Check(ctx, failingReads{events, "p-1"}, candidate(&runs, "a"), replay.Options{}); !errors.Is(err, errDisk) ||
		!strings.Contains(err.Error(), `reading execution "p-1"`) {
		t.Fatalf("a failing read: %v", err)
	}
	other := loom.Config{Flows: []*loom.Flow{loom.NewFlow("other", func(*loom.Context, struct{}) (int, error) { return 0, nil })}}
	rep, err := replay.Check(ctx, events, other, replay.Options{})
	if err != nil || rep.ByVerdict[loom.ReplayUnknownFlow] != 2 || rep.OK() {
		t.Fatalf("no candidate registers the flow: %+v %v", rep, err)
	}
}

// A compacted execution is checked on its whole history when the archive
// is given, and reported unreadable — saying why — when it is not.
func TestCheckReadsACompactedExecutionsHistoryFromTheArchive(t *testing.T) {
	ctx := context.Background()
	set := memstore.NewSet()
	populate(t, loom.Config{Storage: set}, 1, 0, "a", "b", "c")
	var runs atomic.Int64
	rt, err := loom.New(loom.Config{Storage: set, Flows: []*loom.Flow{orderFlow(&runs, "a", "b", "c")}, Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Compact(ctx, "p-0", 4); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	rep, err := replay.Check(ctx, set.Events, candidate(&runs, "a", "b", "c"), replay.Options{Archive: set.Archive})
	if err != nil || !rep.OK() || rep.Checked != 1 {
		t.Fatalf("with the archive: %+v %v", rep, err)
	}
	rep, err = replay.Check(ctx, set.Events, candidate(&runs, "a", "b2", "c"), replay.Options{Archive: set.Archive})
	if err != nil || rep.ByVerdict[loom.ReplayDiverged] != 1 {
		t.Fatalf("a renamed step inside the compacted history: %+v %v", rep, err)
	}
	rep, err = replay.Check(ctx, set.Events, candidate(&runs, "a", "b", "c"), replay.Options{})
	if err != nil || rep.ByVerdict[loom.ReplayUnreadable] != 1 || !strings.Contains(rep.Executions[0].Detail, "Options.Archive") {
		t.Fatalf("without the archive: %+v %v", rep, err)
	}
	if runs.Load() != 0 {
		t.Fatal("a step ran")
	}
}
