package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// Options says which executions Check looks at. The zero value checks
// every in-flight execution (running, parked, or continued without a
// successor yet) and no ended one.
type Options struct {
	// Ended is how many ended executions (completed, failed, cancelled) to
	// check beside the in-flight ones: a seeded sample of that size
	// (negative: all of them). An ended execution never runs again, but
	// one the candidate replays otherwise shows a change of behaviour, and
	// a fork or a simulation of it would follow the new code.
	Ended int
	// Seed picks the sample of ended executions (the same seed and store
	// give the same sample).
	Seed uint64
	// Executions, when set, are the only executions checked, by id
	// (in flight or not); Ended is then ignored.
	Executions []string
	// Workers bounds the executions checked at once (default GOMAXPROCS).
	Workers int
	// Progress, when set, is called after each execution checked with the
	// count so far and the total.
	Progress func(done, total int)
	// Archive, when set, is where compaction moved the logs' settled
	// history (loom.Config.Archive): a compacted execution is checked on
	// its whole history. Without it a compacted execution is reported
	// unreadable, saying so.
	Archive store.ArchiveStore
}

// Report is Check's answer: one loom.ReplayReport per execution checked,
// in execution id order, and the counts.
type Report struct {
	Checked      int                        `json:"checked"`
	Compatible   int                        `json:"compatible"`
	Incompatible int                        `json:"incompatible"`
	ByVerdict    map[loom.ReplayVerdict]int `json:"byVerdict"`
	Executions   []loom.ReplayReport        `json:"executions"`
	Flows        []string                   `json:"flows"` // the candidate flow ids
}

// OK reports whether every execution checked is compatible.
func (r *Report) OK() bool { return r.Incompatible == 0 }

// WriteText writes the report for people: one line per incompatible
// execution, then the counts.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, x := range r.Executions {
		if !x.Compatible() {
			b.WriteString(x.String() + "\n")
		}
	}
	fmt.Fprintf(&b, "checked %d executions against %s: %d compatible, %d incompatible",
		r.Checked, strings.Join(r.Flows, ", "), r.Compatible, r.Incompatible)
	if r.Incompatible > 0 {
		var parts []string
		for _, v := range []loom.ReplayVerdict{loom.ReplayDiverged, loom.ReplayParksDifferently, loom.ReplayPinMismatch,
			loom.ReplayUnknownFlow, loom.ReplayUnreadable} {
			if n := r.ByVerdict[v]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, v))
			}
		}
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// CandidateError refuses a Check whose candidate cannot check anything:
// no flows, or a configuration loom.New refuses.
type CandidateError struct{ Reason string }

func (e *CandidateError) Error() string { return "replay: candidate: " + e.Reason }

// Check replays the executions of src that opts selects against the
// candidate flows of cfg (cfg.Flows, with cfg.Features, Effects, Clock and
// NewID as the app sets them; its stores are not used) and reports each:
// see loom.ReplayVerdict. Each log is read from src and checked in memory
// by a runtime of its own over empty memory stores: no step, decision or
// effect runs, and nothing is written to src or anywhere else. A store
// that cannot be listed or read fails the whole check with an error that
// names the execution; one log that does not fold is reported unreadable.
func Check(ctx context.Context, src store.EventStore, cfg loom.Config, opts Options) (*Report, error) {
	if src == nil {
		return nil, errors.New("replay: no store to check: pass the event store the app's executions are in")
	}
	rt, err := Candidate(cfg)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	ids, err := Select(ctx, src, opts)
	if err != nil {
		return nil, err
	}
	var flows []string
	for _, f := range rt.Flows() {
		flows = append(flows, f.ID)
	}
	rep := NewReport(flows)
	reports := make([]loom.ReplayReport, len(ids))
	workers := cmp.Or(opts.Workers, runtime.GOMAXPROCS(0))
	var (
		mu       sync.Mutex
		done     int
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan int)
	for range min(workers, max(len(ids), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				log, err := History(ctx, src, opts.Archive, ids[i])
				mu.Lock()
				var ce *CompactedError
				compacted := errors.As(err, &ce)
				if err != nil && !compacted && firstErr == nil {
					firstErr = fmt.Errorf("replay: reading execution %q: %w", ids[i], err)
				}
				mu.Unlock()
				if err != nil && !compacted {
					continue
				}
				var r loom.ReplayReport
				if compacted {
					r = loom.ReplayReport{ExecutionID: ids[i], Status: "unknown", Verdict: loom.ReplayUnreadable, Detail: ce.Error()}
				} else {
					r = rt.CheckReplay(ctx, log)
				}
				if r.ExecutionID == "" {
					r.ExecutionID = ids[i]
				}
				reports[i] = r
				mu.Lock()
				done++
				if opts.Progress != nil {
					opts.Progress(done, len(ids))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range ids {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, r := range reports {
		rep.Add(r)
	}
	return rep, nil
}

// Candidate builds the runtime Check replays with: cfg's flows and the
// settings replay depends on, over empty memory stores, with nothing in
// the background (no recovery, no timer poller) and no hooks.
func Candidate(cfg loom.Config) (*loom.Runtime, error) {
	if len(cfg.Flows) == 0 {
		return nil, &CandidateError{Reason: "no flows: pass the flows of the code to deploy in Config.Flows"}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	rt, err := loom.New(loom.Config{
		Events: memstore.NewEventStore(), Timers: memstore.NewTimerStore(), TimerPoll: -1,
		Flows: cfg.Flows, Features: cfg.Features, Effects: cfg.Effects, Clock: cfg.Clock, NewID: cfg.NewID,
		StickyParks: -1, Recovery: loom.Recovery{Disabled: true}, Logger: logger,
	})
	if err != nil {
		return nil, &CandidateError{Reason: err.Error()}
	}
	return rt, nil
}

// NewReport is an empty report of a check against the candidate flows.
func NewReport(flows []string) *Report {
	return &Report{ByVerdict: map[loom.ReplayVerdict]int{}, Executions: []loom.ReplayReport{}, Flows: flows}
}

// Add counts one execution's verdict in.
func (r *Report) Add(x loom.ReplayReport) {
	r.Checked++
	r.ByVerdict[x.Verdict]++
	if x.Compatible() {
		r.Compatible++
	} else {
		r.Incompatible++
	}
	r.Executions = append(r.Executions, x)
}

// isKernelLog says a listed log is the kernel's own (an inbox stream), not
// an execution.
func isKernelLog(workflowID string) bool { return strings.HasPrefix(workflowID, "__loom_") }

// Select lists the ids of the executions of src that opts selects (its
// Executions, else the in-flight ones and a sample of Ended ended ones),
// sorted: what Check checks, for a caller that reads the logs itself.
func Select(ctx context.Context, src store.EventStore, opts Options) ([]string, error) {
	if len(opts.Executions) > 0 {
		ids := slices.Clone(opts.Executions)
		slices.Sort(ids)
		return slices.Compact(ids), nil
	}
	inFlight := map[string]bool{}
	if idx, ok := src.(store.StatusIndex); ok {
		for after := ""; ; {
			page, err := idx.ListUnfinished(ctx, after, listPage)
			if err != nil {
				return nil, fmt.Errorf("replay: listing in-flight executions: %w", err)
			}
			for _, u := range page.Executions {
				if !isKernelLog(u.WorkflowID) {
					inFlight[u.ExecutionID] = true
				}
			}
			if after = page.Next; after == "" {
				break
			}
		}
		if opts.Ended == 0 {
			return sortedKeys(inFlight), nil
		}
	}
	// Without an index, or for the ended sample: every log, its status
	// from its last status event.
	var ended []string
	seen := 0
	rng := mrand.New(mrand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	_, indexed := src.(store.StatusIndex)
	for after := ""; ; {
		page, err := src.ListExecutions(ctx, after, listPage)
		if err != nil {
			return nil, fmt.Errorf("replay: listing executions: %w", err)
		}
		for _, x := range page.Executions {
			if isKernelLog(x.WorkflowID) || inFlight[x.ExecutionID] {
				continue
			}
			if !indexed {
				finished, err := hasEnded(ctx, src, x)
				if err != nil {
					return nil, err
				}
				if !finished {
					inFlight[x.ExecutionID] = true
					continue
				}
			}
			// Reservoir sampling: each ended execution is kept with
			// probability Ended/seen.
			seen++
			switch {
			case opts.Ended < 0 || len(ended) < opts.Ended:
				ended = append(ended, x.ExecutionID)
			default:
				if j := rng.IntN(seen); j < opts.Ended {
					ended[j] = x.ExecutionID
				}
			}
		}
		if after = page.Next; after == "" {
			break
		}
	}
	if opts.Ended == 0 {
		ended = nil
	}
	ids := append(sortedKeys(inFlight), ended...)
	slices.Sort(ids)
	return ids, nil
}

// hasEnded says x's log ends in a terminal status, reading its last
// event (a status event or not: a terminal event is always the last).
func hasEnded(ctx context.Context, src store.EventStore, x store.ExecutionInfo) (bool, error) {
	if x.Length == 0 {
		return false, nil
	}
	last, err := store.ReadRange(ctx, src, x.ExecutionID, x.Length-1, x.Length)
	if err != nil {
		return false, fmt.Errorf("replay: reading execution %q: %w", x.ExecutionID, err)
	}
	if len(last) == 0 {
		return false, nil
	}
	switch last[0].Type {
	case event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled, event.ExecutionContinued:
		return true, nil
	}
	return false, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m { //loom:sorted below
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// listPage is the page size Check lists with (stores cap it at their own
// maximum).
const listPage = 1000

// CompactedError says an execution's log was compacted and History was
// given no archive to read the moved events from.
type CompactedError struct {
	ExecutionID string
	Through     int64
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("replay: %q is compacted through #%d and no archive was given: pass the app's archive (Options.Archive) to check its whole history", e.ExecutionID, e.Through)
}

// History reads an execution's whole history: its log, and for a
// compacted one (its log jumps from #0 to a later sequence) the events
// compaction moved into archive, in sequence order. A compacted log with
// no archive is a *CompactedError; an archive missing some of the moved
// events, an error naming them.
func History(ctx context.Context, events store.EventStore, archive store.ArchiveStore, id string) ([]event.Envelope, error) {
	log, err := store.Read(ctx, events, id)
	if err != nil || len(log) < 2 || log[1].Sequence == 1 {
		return log, err
	}
	through := log[1].Sequence - 1
	if archive == nil {
		return nil, &CompactedError{ExecutionID: id, Through: through}
	}
	moved, err := archive.ReadArchived(ctx, id, 1, through+1)
	if err != nil {
		return nil, err
	}
	if int64(len(moved)) != through {
		return nil, fmt.Errorf("replay: the archive holds %d of the %d events #1..#%d compaction moved out of %q", len(moved), through, through, id)
	}
	out := make([]event.Envelope, 0, len(log)+len(moved))
	out = append(out, log[0])
	out = append(out, moved...)
	return append(out, log[1:]...), nil
}
