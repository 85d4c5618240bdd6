package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// The probe of workload d: a flow that runs trivial steps and then parks
// again and again, and one process's view of its database.

const (
	resumeFlowID = "resume-probe"
	resumeGate   = "next"
	// probeStickyParks is the StickyParks the probe's runtimes run under:
	// 0, loom.Config's default (256), spelled out because the two paths of
	// workload d depend on it. The runtime that parked the probe keeps its
	// park in memory and answers a Resume in place (warm); a new runtime
	// has no park in memory, so its first Resume loads and replays (cold).
	probeStickyParks = 0
)

// resumeInput sizes the probe: Steps steps, then Gates parks.
type resumeInput struct {
	Steps int `json:"steps"`
	Gates int `json:"gates"`
}

// loopStep returns its input: the trivial step the probe loops over.
var loopStep = loom.NewStep("s", func(_ context.Context, i int) (int, error) { return i, nil })

// resumeProbeFlow runs in.Steps steps, then parks on resumeGate in.Gates
// times, then completes. Every park is at the root (no Parallel branch), so
// it is eligible to stay sticky.
func resumeProbeFlow() *loom.Flow {
	return loom.NewFlow(resumeFlowID, func(ctx *loom.Context, in resumeInput) (int, error) {
		for i := range in.Steps {
			if _, err := loom.Run(ctx, loopStep.Iter(i), i); err != nil {
				return 0, err
			}
		}
		for range in.Gates {
			if _, err := loom.Suspend[int](ctx, resumeGate); err != nil {
				return 0, err
			}
		}
		return in.Gates, nil
	})
}

// probeRuntime is what one process holds over the probe's database: the
// SQLite storage (plugin defaults, snapshot store), a runtime with the
// default configuration but for the guards, and the guards themselves,
// which tell which path a resume took and whether the runtime complained.
type probeRuntime struct {
	db       *sqlite.DB
	events   *sqlite.EventStore
	snaps    *sqlite.SnapshotStore // the same store, for the harness's waits
	loads    *countingSnapshots    // the runtime's view of snaps
	warnings *warningLog
	rt       *loom.Runtime
}

// openProbe opens (creating) the database at path and builds a runtime over
// it, as a process starting up would.
func openProbe(path string, sync sqlite.Synchronous) (*probeRuntime, error) {
	db, err := sqlite.Open(path, sqlite.WithSynchronous(sync))
	if err != nil {
		return nil, err
	}
	p := &probeRuntime{db: db, events: db.EventStore(), snaps: db.SnapshotStore(), warnings: &warningLog{}}
	p.loads = &countingSnapshots{SnapshotStore: p.snaps}
	p.rt, err = loom.New(loom.Config{Events: p.events, Snapshots: p.loads, Flows: []*loom.Flow{resumeProbeFlow()}, Recovery: loom.Recovery{Disabled: true},
		StickyParks: probeStickyParks, Logger: slog.New(p.warnings)})
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return p, nil
}

// Close closes the runtime (a sticky park unwinds, nothing is recorded),
// then the storage, as a process exiting would.
func (p *probeRuntime) Close() error {
	err := p.rt.Close()
	return errors.Join(err, p.db.Close())
}

// healthy fails if the runtime logged a warning since it was built: a
// snapshot ignored, a replay that diverged, a drive aborted. Any of them
// would change what the measurement means.
func (p *probeRuntime) healthy() error {
	if n, first := p.warnings.read(); n > 0 {
		return fmt.Errorf("the runtime logged %d warning(s), the first: %s", n, first)
	}
	return nil
}

// warningLog is a slog.Handler that counts the records at Warn and above
// and keeps the first, rendered as its message and attributes.
type warningLog struct {
	mu    sync.Mutex
	n     int
	first string
}

// Enabled reports whether level is a warning or worse.
func (w *warningLog) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn
}

// Handle counts r and keeps it if it is the first.
func (w *warningLog) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if w.n == 1 {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		w.first = b.String()
	}
	return nil
}

// WithAttrs returns w: the runtime's records carry their own attributes.
func (w *warningLog) WithAttrs([]slog.Attr) slog.Handler { return w }

// WithGroup returns w.
func (w *warningLog) WithGroup(string) slog.Handler { return w }

// read returns the count and the first record.
func (w *warningLog) read() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, w.first
}
