package divergence

import (
	"sort"
	"strconv"

	"github.com/loom-kernel/loom/fold"
)

// Detector follows one re-run of a flow against the step ids of its log.
type Detector struct {
	expected []string       // logged step ids in creation order
	seqs     []int64        // the creating sequence of each
	index    map[string]int // position of each logged id
	matched  []bool
	next     int // first unmatched position
	reported bool
}

// New returns a detector for a re-run over s: the expected order is that of
// the frames' creating sequences (fold.Frame.Seq), ties broken by step id so
// that even a hand-built state yields one order.
func New(s fold.State) *Detector {
	frames := make([]fold.Frame, 0, len(s.Frames))
	for _, fr := range s.Frames { //loom:sorted by Seq, then step id, below
		frames = append(frames, fr)
	}
	sort.Slice(frames, func(i, j int) bool {
		if frames[i].Seq != frames[j].Seq {
			return frames[i].Seq < frames[j].Seq
		}
		return frames[i].StepID < frames[j].StepID
	})
	d := &Detector{expected: make([]string, len(frames)), seqs: make([]int64, len(frames)),
		index: make(map[string]int, len(frames)), matched: make([]bool, len(frames))}
	for i, fr := range frames {
		d.expected[i] = fr.StepID
		d.seqs[i] = fr.Seq
		d.index[fr.StepID] = i
	}
	return d
}

// RootStep checks a step id the re-run issued outside Parallel and returns
// a description of the divergence, or "" when the id is the log's next
// unmatched step, a reused id already matched, or new work past the
// recorded prefix. A diverging id matches nothing, so the log's step stays
// expected.
func (d *Detector) RootStep(id string) (msg string) {
	if pos, ok := d.index[id]; ok && d.matched[pos] {
		return "" // a reused id is served its first outcome
	}
	d.skipMatched()
	if d.next >= len(d.expected) {
		return "" // past the recorded prefix: new work
	}
	if want := d.expected[d.next]; want != id {
		return "step " + strconv.Quote(id) + " issued where the log has " + strconv.Quote(want)
	}
	d.matched[d.next] = true
	return ""
}

// BlockSteps matches the ids a finished Parallel block issued, as a set,
// and returns a description of the divergence, or "": a logged step created
// before the block's last logged step that neither the block nor an earlier
// step issued was skipped by the re-run. Ids the log does not hold are new
// work.
func (d *Detector) BlockSteps(ids map[string]bool) (msg string) {
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

// Report reports whether msg is a divergence to report: non-empty and the
// first this detector was asked about. Later ones are consequences of the
// first (a re-run that parted from the log stays apart).
func (d *Detector) Report(msg string) bool {
	if msg == "" || d.reported {
		return false
	}
	d.reported = true
	return true
}

// Next returns the log's first step the re-run has not issued yet, with
// the sequence that created it; ok is false once every logged step was
// issued.
func (d *Detector) Next() (id string, seq int64, ok bool) {
	d.skipMatched()
	if d.next >= len(d.expected) {
		return "", 0, false
	}
	return d.expected[d.next], d.seqs[d.next], true
}

func (d *Detector) skipMatched() {
	for d.next < len(d.expected) && d.matched[d.next] {
		d.next++
	}
}
