package loom

import (
	"strconv"
	"sync"

	"github.com/loom-kernel/loom/fold"
)

// observeStep feeds the detector; in fail mode a divergence parks the run
// on the reserved gate before the diverging step runs.
func (r *drive) observeStep(c *Context, id string, live bool) {
	if r.div == nil {
		return
	}
	if c.block != nil {
		c.block.add(id)
		return
	}
	r.mu.Lock()
	want, wantSeq, _ := r.div.Next()
	msg := r.div.RootStep(id)
	report := r.div.Report(msg)
	r.mu.Unlock()
	if !report {
		return
	}
	if r.verifying() {
		r.reach(frontier{kind: frontierDiverged, want: "step " + strconv.Quote(want), wantSeq: wantSeq,
			got: "step " + strconv.Quote(id), detail: msg})
	}
	r.reportDivergence(msg)
}

func (r *drive) reportDivergence(msg string) {
	if r.rt.cfg.Divergence == DivergenceFail {
		r.park(suspendPayload{On: fold.GateDiverged, Reason: msg})
	}
	r.rt.cfg.Logger.Warn("loom: replay diverged from the log", "execution", r.x.id, "detail", msg)
}

// idSet collects the step ids a root-level Parallel block issues.
type idSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *idSet) add(id string) {
	s.mu.Lock()
	s.ids[id] = true
	s.mu.Unlock()
}

// endBlock feeds a finished root-level block to the detector.
func (r *drive) endBlock(b *idSet) {
	if r.div == nil {
		return
	}
	r.mu.Lock()
	msg := r.div.BlockSteps(b.ids)
	report := r.div.Report(msg)
	want, wantSeq, _ := r.div.Next()
	r.mu.Unlock()
	if report {
		if r.verifying() {
			r.reach(frontier{kind: frontierDiverged, want: "step " + strconv.Quote(want), wantSeq: wantSeq,
				got: "a Parallel block without it", detail: msg})
		}
		r.reportDivergence(msg)
	}
}

// observeGate reports a recorded gate answer served to another gate than
// the one it answered: the re-run reached a gate the log does not have
// there.
func (r *drive) observeGate(gate string, entry fold.ResumeEntry) {
	msg := "gate " + strconv.Quote(gate) + " reached where the log's answer (sequence " +
		strconv.FormatInt(entry.Seq, 10) + ") is for gate " + strconv.Quote(entry.EventType)
	r.mu.Lock()
	report := r.div.Report(msg)
	r.mu.Unlock()
	if report {
		if r.verifying() {
			r.reach(frontier{kind: frontierDiverged, want: "the answer to gate " + strconv.Quote(entry.EventType),
				wantSeq: entry.Seq, got: "gate " + strconv.Quote(gate), detail: msg})
		}
		r.reportDivergence(msg)
	}
}
