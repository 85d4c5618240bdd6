package fold

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/loom-kernel/loom/event"
)

// benchLog builds a log of n events. long: a few step ids reused in a loop
// (id#i) with decisions and emits, the shape of a long agent run; wide: n/2
// distinct frames, each started and completed.
func benchLog(n int, wide bool) []event.Envelope {
	l := newLog().started()
	for i := 1; len(l.evs) < n; i++ {
		id := fmt.Sprintf("step#%d", i)
		switch {
		case wide:
			l.add(event.StepStarted, `{"stepId":"`+id+`","input":{"i":`+itoa(int64(i))+`,"q":"text"}}`)
			l.add(event.StepCompleted, `{"stepId":"`+id+`","output":{"ok":true,"n":`+itoa(int64(i))+`}}`)
		default:
			id = fmt.Sprintf("turn#%d", i%16)
			l.add(event.StepStarted, `{"stepId":"`+id+`","input":{"i":`+itoa(int64(i))+`,"q":"text"}}`)
			l.add(event.StepCompleted, `{"stepId":"`+id+`","output":{"ok":true,"n":`+itoa(int64(i))+`}}`)
			l.add(event.DecisionRecorded, `{"decisionId":"d`+itoa(int64(i%32))+`","choice":"a"}`)
			l.emit("progress", `{"i":`+itoa(int64(i))+`}`, "d"+itoa(int64(i%8)))
		}
	}
	return l.evs[:n]
}

var benchShapes = []struct {
	name string
	n    int
	wide bool
}{
	{"long-10k", 10_000, false}, {"long-20k", 20_000, false},
	{"wide-10k", 10_000, true}, {"wide-20k", 20_000, true},
}

// BenchmarkFold folds pre-decoded logs; compare its events/s with
// BenchmarkDecode on the same shape (target: fold >= 50% of decode).
func BenchmarkFold(b *testing.B) {
	for _, sh := range benchShapes {
		evs := benchLog(sh.n, sh.wide)
		b.Run(sh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Fold(evs)
			}
			b.ReportMetric(float64(sh.n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkDecode is plain json.Unmarshal of the same events: the baseline.
func BenchmarkDecode(b *testing.B) {
	for _, sh := range benchShapes {
		raw, err := json.Marshal(benchLog(sh.n, sh.wide))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(sh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var evs []event.Envelope
				if err := json.Unmarshal(raw, &evs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(sh.n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
