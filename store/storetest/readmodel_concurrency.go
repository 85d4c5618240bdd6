package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// The racing subtests' sizes: raceWorkers goroutines fold raceSteps steps
// of one source, or each add rowIncrements to one shared row.
const (
	raceWorkers   = 8
	raceSteps     = 24
	rowIncrements = 6
)

// raceKinds and raceProjection are what the racing subtests write.
var raceKinds = []string{"item", "tally"}

const raceProjection = "race"

// stepWrites returns the writes of step k of the kit's projection, at the
// row versions s holds now: the tally row rewritten, a new item, and every
// third step the item of two steps back deleted.
func stepWrites(s store.ReadModelStore, k int64) ([]store.ReadModelWrite, error) {
	version := func(kind, id string) (int64, error) {
		r, _, err := s.Get(bg, kind, id)
		return r.Version, err
	}
	item := func(k int64) string { return fmt.Sprintf("i%03d", k) }
	parity := strconv.FormatInt(k%2, 10)
	v, err := version("tally", "total")
	if err != nil {
		return nil, err
	}
	writes := []store.ReadModelWrite{
		put(model("tally", "total", `{"step":`+strconv.FormatInt(k, 10)+`}`, "parity", parity), v),
	}
	if v, err = version("item", item(k)); err != nil {
		return nil, err
	}
	writes = append(writes, put(model("item", item(k), `{"step":`+strconv.FormatInt(k, 10)+`}`, "bucket", strconv.FormatInt(k%3, 10)), v))
	if k >= 2 && k%3 == 0 {
		if v, err = version("item", item(k-2)); err != nil {
			return nil, err
		}
		writes = append(writes, del("item", item(k-2), v))
	}
	return writes, nil
}

// isCASLoss reports whether err is an Apply lost to another writer.
func isCASLoss(err error) bool {
	return errors.Is(err, store.ErrWatermarkConflict) || errors.Is(err, store.ErrReadModelVersionConflict)
}

func (k readModelKit) concurrentSteps(t *testing.T) {
	s := k.open(t)
	var wins [raceSteps]atomic.Int32
	// A lost Apply means another won since the loser read the watermark,
	// so a worker makes at most 2*raceSteps+1 attempts; past this bound the
	// store is refusing without a winner.
	const maxAttempts = 4*raceSteps + 8
	errs := make(chan error, raceWorkers)
	var wg sync.WaitGroup
	for range raceWorkers {
		wg.Go(func() {
			for range maxAttempts {
				wm, _, err := s.Watermark(bg, raceProjection, "src")
				if err != nil {
					errs <- err
					return
				}
				if wm == raceSteps-1 {
					return
				}
				writes, err := stepWrites(s, wm+1)
				if err != nil {
					errs <- err
					return
				}
				switch err := s.Apply(bg, raceProjection, "src", wm, wm+1, writes); {
				case err == nil:
					wins[wm+1].Add(1)
				case !isCASLoss(err):
					errs <- fmt.Errorf("an Apply from %d: %w", wm, err)
					return
				}
			}
			errs <- fmt.Errorf("a worker lost %d Applies in a row", maxAttempts)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for step := range wins {
		if n := wins[step].Load(); n != 1 {
			t.Fatalf("step %d was applied by %d writers, want exactly 1", step, n)
		}
	}
	seq := k.open(t)
	for step := range int64(raceSteps) {
		writes, err := stepWrites(seq, step)
		if err != nil {
			t.Fatal(err)
		}
		mustApply(t, seq, raceProjection, "src", step-1, step, writes...)
	}
	projections := []string{raceProjection}
	sameState(t, "racing writers against a sequential run", s, raceKinds, projections, stateOf(t, seq, raceKinds, projections))
}

func (k readModelKit) concurrentRowWriters(t *testing.T) {
	s := k.open(t)
	const total = raceWorkers * rowIncrements
	const maxAttempts = 2*total + 8 // as in concurrentSteps: a loss is another's win
	errs := make(chan error, raceWorkers)
	var wg sync.WaitGroup
	for w := range raceWorkers {
		source := "worker-" + strconv.Itoa(w)
		wg.Go(func() {
			wm, done := store.NoWatermark, 0
			for range maxAttempts {
				if done == rowIncrements {
					return
				}
				r, _, err := s.Get(bg, "tally", "shared")
				if err != nil {
					errs <- err
					return
				}
				n, err := countOf(r)
				if err != nil {
					errs <- err
					return
				}
				doc := `{"n":` + strconv.Itoa(n+1) + `}`
				switch err := s.Apply(bg, raceProjection, source, wm, wm+1, []store.ReadModelWrite{put(model("tally", "shared", doc), r.Version)}); {
				case err == nil:
					wm, done = wm+1, done+1
				case !errors.Is(err, store.ErrReadModelVersionConflict):
					errs <- fmt.Errorf("%s: Apply at version %d: %w", source, r.Version, err)
					return
				}
			}
			errs <- fmt.Errorf("%s lost %d Applies in a row", source, maxAttempts)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := mustGet(t, s, "tally", "shared")
	if n, err := countOf(r); err != nil || n != total || r.Version != total {
		t.Fatalf("after %d increments by %d writers the row holds %s at version %d (%v): an update was lost",
			total, raceWorkers, r.Doc, r.Version, err)
	}
	for w := range raceWorkers {
		assertWatermark(t, s, raceProjection, "worker-"+strconv.Itoa(w), rowIncrements-1)
	}
}

// countOf reads the counter of a tally row, 0 for no row.
func countOf(r store.ReadModel) (int, error) {
	if r.Version == 0 {
		return 0, nil
	}
	var doc struct {
		N int `json:"n"`
	}
	err := json.Unmarshal(r.Doc, &doc)
	return doc.N, err
}
