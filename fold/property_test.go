package fold

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/loom-kernel/loom/event"
	"pgregory.net/rapid"
)

// genLog draws a random log: every known type and some unknown ones, with
// small id pools so steps, decisions, topics and digests collide, random
// kernel stamps, and nested payloads whose keys need sorting.
func genLog() *rapid.Generator[[]event.Envelope] {
	return rapid.Custom(func(t *rapid.T) []event.Envelope {
		n := rapid.IntRange(1, 60).Draw(t, "n")
		ids := []string{"a", "b", "c", "a#1", "é"}
		gates := []string{"approve", "review", GateInDoubt, GateDiverged, "TIMER_FIRED"}
		topics := []string{"t1", "t2"}
		val := rapid.SampledFrom([]string{`1`, `null`, `"s"`, `{"z":1,"a":[true,{"y":2,"b":3}]}`, `1.5`, `[]`, `12345678901234567890`})
		evs := []event.Envelope{{Type: event.ExecutionStarted, Payload: json.RawMessage(`{"input":{"q":1}}`)}}
		types := append(event.KnownTypes(), "app.event", "SOMETHING_NEW")
		for i := 1; i < n; i++ {
			typ := rapid.SampledFrom(types).Draw(t, "type")
			id := rapid.SampledFrom(ids).Draw(t, "id")
			v := val.Draw(t, "val")
			var p string
			switch typ {
			case event.ExecutionSuspended:
				p = fmt.Sprintf(`{"on":%q,"wakeAt":%d,"stepId":%q}`, rapid.SampledFrom(gates).Draw(t, "gate"), i, id)
			case event.ExecutionResumed:
				p = rapid.SampledFrom([]string{`null`, `{"eventType":"approve","payload":` + v + `}`,
					`{"eventType":"approve","payload":null,"waitId":"` + id + `"}`, v}).Draw(t, "resume")
			case event.StepStarted, event.StepCompleted, event.StepFailed, event.StepRetrying, event.StepCancelled, event.EffectInDoubt:
				p = fmt.Sprintf(`{"stepId":%q,"input":%s,"output":%s,"error":%s,"attempt":%d}`, id, v, v, v, rapid.IntRange(0, 3).Draw(t, "attempt"))
				if rapid.Bool().Draw(t, "typed") {
					p = fmt.Sprintf(`{"stepId":%q,"error":"e","channel":"c","payload":%s}`, id, v)
				}
			case event.DecisionRecorded:
				p = fmt.Sprintf(`{"decisionId":%q,"choice":%s,"innerSteps":[1]}`, id, v)
			case event.ResourceMetered:
				p = fmt.Sprintf(`{"tokens":%d,"costUsd":0.1,"custom":{%q:1}}`, rapid.IntRange(-1, 5).Draw(t, "tok"), id)
			case event.MessageConsumed, event.InboxQuarantined, event.InboxReleased:
				p = fmt.Sprintf(`{"topic":%q,"messageId":%q,"waitId":%q,"operator":"o"}`, rapid.SampledFrom(topics).Draw(t, "topic"), id, id)
			case event.ParallelCompleted:
				p = fmt.Sprintf(`{"scopeId":%q,"status":"completed","branches":2}`, id)
			default:
				p = fmt.Sprintf(`{"stepId":%q,"reason":"r","outcome":%s,"subject":%q,"nextExecutionId":"n","toFlowHash":"h","migratedInput":%s}`, id, v, id, v)
			}
			e := event.Envelope{Type: typ, Payload: json.RawMessage(p)}
			meta := map[string]json.RawMessage{}
			if rapid.Bool().Draw(t, "kernel") {
				meta["kernel"] = json.RawMessage("true")
				meta["forkChain"] = json.RawMessage(`[` + v + `]`)
			}
			if rapid.IntRange(0, 4).Draw(t, "emit") == 0 {
				meta["flowEmit"] = json.RawMessage(`"` + rapid.SampledFrom(ids).Draw(t, "digest") + `"`)
			}
			if len(meta) > 0 {
				e.Metadata = meta
			}
			evs = append(evs, e)
		}
		for i := range evs {
			evs[i].ID, evs[i].ExecutionID, evs[i].WorkflowID = fmt.Sprint("e", i), "ex", "wf"
			evs[i].Sequence, evs[i].Timestamp = int64(i), int64(1000+7*i)
		}
		return evs
	})
}

func TestPropertySnapshotAtAnyKPlusTailEqualsWholeFold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		evs := genLog().Draw(t, "log")
		want := mustEncode(t, Fold(evs))
		for k := 0; k <= len(evs); k++ {
			raw, err := EncodeSnapshot(Fold(evs[:k]))
			if err != nil {
				t.Fatalf("snapshot encoding: %v", err)
			}
			snap := string(raw)
			if k%2 == 1 {
				snap = mustEncode(t, Fold(evs[:k])) // both encodings decode alike
			}
			s, err := NormalizeSnapshot(event.SchemaVersion, []byte(snap))
			if err != nil {
				t.Fatalf("snapshot at %d does not decode: %v\n%s", k, err, snap)
			}
			if got := mustEncode(t, FoldFrom(s, evs[k:])); got != want {
				t.Fatalf("fold(snapshot@%d, tail) != fold(all)\n got  %s\n want %s", k, got, want)
			}
		}
	})
}

func TestPropertyFoldIsDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		evs := genLog().Draw(t, "log")
		if a, b := mustEncode(t, Fold(evs)), mustEncode(t, Fold(evs)); a != b {
			t.Fatalf("two folds differ:\n%s\n%s", a, b)
		}
		// Event by event through Apply gives the same bytes as one pass.
		s := Initial()
		for _, e := range evs {
			s = Apply(s, e)
		}
		if a, b := mustEncode(t, s), mustEncode(t, Fold(evs)); a != b {
			t.Fatalf("Apply chain differs from Fold:\n%s\n%s", a, b)
		}
	})
}

func TestPropertyApplyNeverMutatesItsInput(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		evs := genLog().Draw(t, "log")
		k := rapid.IntRange(0, len(evs)-1).Draw(t, "k")
		s := Fold(evs[:k])
		before := mustEncode(t, s)
		for _, e := range evs[k:] {
			Apply(s, e)
			if mustEncode(t, s) != before {
				t.Fatalf("Apply(%s) mutated its input", e.Type)
			}
		}
	})
}
