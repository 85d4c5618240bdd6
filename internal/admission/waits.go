package admission

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Reserved gates the runtime parks on besides fold.GateInDoubt and
// fold.GateDiverged. No caller answers them by name: the reserved-namespace
// rule refuses every event type starting with ReservedPrefix except
// fold.GateDiverged.
const (
	// GateSelect is the gate a Select parks on; its waits say what answers it.
	GateSelect = "__loom_select__"
	// GateSleep is the gate a Sleep parks on: only its timer answers it.
	GateSleep = "__loom_sleep__"
	// ReservedPrefix starts every kernel-reserved name (gates, decision ids).
	ReservedPrefix = "__loom_"
)

// Wait kinds of a Select's waits (WaitSpec.Kind).
const (
	WaitGate    = "gate"
	WaitMessage = "message"
	WaitTimer   = "timer"
)

// WaitSpec is one entry of EXECUTION_SUSPENDED.waits: a Select case with its
// deterministic wait id. A gate wait names its gate (On), a message wait its
// topic, a timer wait its recorded WakeAt (epoch ms).
type WaitSpec struct {
	WaitID string `json:"waitId"`
	Kind   string `json:"kind"`
	On     string `json:"on,omitempty"`
	Topic  string `json:"topic,omitempty"`
	WakeAt *int64 `json:"wakeAt,omitempty"`
}

// ParkWaits decodes the waits of the current park, in recorded order. A
// park without waits, or with a waits list that does not decode as a whole,
// has none: a malformed list answers nothing rather than half of itself.
func ParkWaits(st fold.State) []WaitSpec {
	if len(st.Variables.Waits) == 0 {
		return nil
	}
	var waits []WaitSpec
	if unmarshal(st.Variables.Waits, &waits) != nil {
		return nil
	}
	return waits
}

// Answered reports whether wait id already has its recorded answer
// (_waitAnswers).
func Answered(st fold.State, waitID string) bool {
	_, ok := st.Variables.WaitAnswers[waitID]
	return ok
}

// decided returns the first wait of waits that already has its answer: a
// Select that has one is decided and wakes on its own, so nothing else may
// answer it.
func decided(st fold.State, waits []WaitSpec) (string, bool) {
	for _, w := range waits {
		if Answered(st, w.WaitID) {
			return w.WaitID, true
		}
	}
	return "", false
}

// TimerFired is TIMER_FIRED's payload and a timer answer's recorded value.
type TimerFired struct {
	WakeAt int64 `json:"wakeAt"`
}

// DecodeTimerFired decodes a timer resume's payload; ok is false unless it is
// an object carrying a positive wakeAt (epoch ms).
func DecodeTimerFired(raw json.RawMessage) (TimerFired, bool) {
	var p TimerFired
	if len(raw) == 0 || unmarshal(raw, &p) != nil || p.WakeAt <= 0 {
		return TimerFired{}, false
	}
	return p, true
}

// timerPayload is the canonical recorded form of a timer's answer.
func timerPayload(wakeAt int64) json.RawMessage {
	return json.RawMessage(`{"wakeAt":` + strconv.FormatInt(wakeAt, 10) + `}`)
}

// IsNullJSON reports whether raw is absent, blank or the JSON null.
func IsNullJSON(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// orNull returns raw, or the JSON null when it is absent.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// unmarshal decodes a recorded payload with exact member names, as every
// other implementation of the log reads it.
func unmarshal(data []byte, v any) error {
	return event.UnmarshalExact(data, v)
}
