package loom

import (
	"sort"
	"strconv"
	"sync"

	"github.com/loom-kernel/loom/fold"
)

// divergence is the replay-divergence detector (ADR 0113): the step ids a
// re-run issues are compared with the order their frames were created in
// the log. Outside Parallel the order is strict; a Parallel block's steps
// may interleave, so its block is matched as a set when it ends.
type divergence struct {
	expected []string       // logged step ids in creation order
	index    map[string]int // position of each logged id
	matched  []bool
	next     int // first unmatched position
	reported bool
}

func newDivergence(s fold.State) *divergence {
	frames := make([]fold.Frame, 0, len(s.Frames))
	for _, fr := range s.Frames { //loom:sorted by Seq below
		frames = append(frames, fr)
	}
	sort.Slice(frames, func(i, j int) bool { return frames[i].Seq < frames[j].Seq })
	d := &divergence{index: make(map[string]int, len(frames)), matched: make([]bool, len(frames))}
	for i, fr := range frames {
		d.expected = append(d.expected, fr.StepID)
		d.index[fr.StepID] = i
	}
	return d
}

// rootStep checks a step id issued outside Parallel. It returns a
// description of the divergence, or "".
func (d *divergence) rootStep(id string) string {
	if pos, ok := d.index[id]; ok && d.matched[pos] {
		return "" // a reused id is served its first outcome
	}
	d.skipMatched()
	if d.next >= len(d.expected) {
		return "" // past the recorded prefix: new work
	}
	want := d.expected[d.next]
	if want != id {
		return "step " + strconv.Quote(id) + " issued where the log has " + strconv.Quote(want)
	}
	d.matched[d.next] = true
	return ""
}

// blockSteps matches the ids a finished Parallel block issued, as a set: a
// logged step created before the block's last logged step that neither the
// block nor an earlier step issued was skipped by the re-run.
func (d *divergence) blockSteps(ids map[string]bool) string {
	last := -1
	for id := range ids { //loom:order-independent marks and a maximum
		if pos, ok := d.index[id]; ok {
			d.matched[pos] = true
			last = max(last, pos)
		}
	}
	d.skipMatched()
	if d.next < last {
		return "the log's step " + strconv.Quote(d.expected[d.next]) + " was not issued by the re-run"
	}
	return ""
}

func (d *divergence) skipMatched() {
	for d.next < len(d.expected) && d.matched[d.next] {
		d.next++
	}
}

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
	msg := r.div.rootStep(id)
	report := msg != "" && !r.div.reported
	if report {
		r.div.reported = true
	}
	r.mu.Unlock()
	if !report {
		return
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
	msg := r.div.blockSteps(b.ids)
	report := msg != "" && !r.div.reported
	if report {
		r.div.reported = true
	}
	r.mu.Unlock()
	if report {
		r.reportDivergence(msg)
	}
}
