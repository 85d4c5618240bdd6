package admission

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/schema"
)

// Event is a resume as the ingress gate sees it: the caller's event type
// (the gate it answers) and its answer. Credentials never reach the gate:
// identity is checked before it.
type Event struct {
	Type    string
	Payload json.RawMessage
}

// Action is what an admitted resume does to the log (Admission.Events).
type Action string

// The actions.
const (
	// ActionAnswer answers the park: EXECUTION_RESUMED with the answer,
	// after TIMER_FIRED for a timer's answer; wait-addressed and
	// kernel-stamped when it answers a Select's wait.
	ActionAnswer Action = "answer"
	// ActionRedrive re-drives a crashed execution: EXECUTION_RECOVERED and no
	// EXECUTION_RESUMED, since nothing is parked to answer.
	ActionRedrive Action = "redrive"
	// ActionReopen re-opens an ended execution (resumeAs): a null
	// EXECUTION_RESUMED, status only.
	ActionReopen Action = "reopen"
	// ActionVerdict records an operator's in-doubt verdict: a kernel
	// DECISION_RECORDED keyed by the step attempt, beside a null
	// EXECUTION_RESUMED.
	ActionVerdict Action = "verdict"
)

// Admission is what an admitted resume answers. It holds nothing but what
// its events need; build them with Events.
type Admission struct {
	Action Action
	// EventType is the resume's event type as recorded (ActionAnswer).
	EventType string
	// Payload is the answer to record (ActionAnswer): the caller's payload
	// parsed by the gate's resume schema when one is declared for EventType,
	// the canonical {"wakeAt":…} for a timer's answer, JSON null for a
	// reserved gate's status-only answer. Always UTF-8 JSON.
	Payload json.RawMessage
	// WaitID is the Select wait the answer addresses; "" for a positional
	// gate.
	WaitID string
	// WakeAt is the recorded wakeAt (epoch ms) a TIMER_FIRED answer fires;
	// nil for every other answer.
	WakeAt *int64

	reason  string  // ActionRedrive: EXECUTION_RECOVERED.reason
	verdict Verdict // ActionVerdict
}

// Verdict is an operator's answer to an in-doubt park (K9.3): the effect
// is known to have happened (Done, with its Output), or it must run again.
// Its fields are those of loom.Verdict, so one converts into the other.
type Verdict struct {
	StepID  string
	Attempt int64
	Done    bool
	Output  json.RawMessage
}

// Redrive reasons recorded on EXECUTION_RECOVERED.
const (
	redriveReason  = "re-driven after its driver stopped"
	resumeAsReason = "resumeAs"
)

// KernelNamespace is rule 1 alone, the part of the ingress gate that
// depends on nothing but the event type: a resume may not carry a kernel
// event type (event.IsKnown) other than TIMER_FIRED (the kernel's own timer
// resume, checked against the recorded wakeAt) and EXECUTION_RECOVERED (a
// re-drive). The runtime calls it before identity, so an authenticator is
// never asked about a forged kernel event; Admit applies it again. The
// reserved __loom_ namespace (rule 4) is NOT checked here: what a reserved
// name means depends on the park (rule 3).
func KernelNamespace(eventType string) error {
	if r := kernelType(eventType); r != nil {
		return r
	}
	return nil
}

// Admit applies every rule of the ingress gate (spec §5, in the order of
// the package documentation) to a resume ev of an execution in state st,
// and returns what it answers. schemas are the target flow's resume
// schemas by gate; nowMs is the runtime clock's now in epoch ms, read by
// the timer rule only. A resume typed EXECUTION_RECOVERED is a re-drive
// (AdmitRedrive). Admit reads nothing but its arguments and never modifies
// st; every refusal is a *Refusal.
func Admit(st fold.State, schemas map[string]*schema.Schema, ev Event, nowMs int64) (Admission, error) {
	if r := kernelType(ev.Type); r != nil { // 1
		return Admission{}, r
	}
	if ev.Type == event.ExecutionRecovered { // 2
		return AdmitRedrive(st)
	}
	if r := inDoubtPark(st); r != nil { // 3
		return Admission{}, r
	}
	if r := reservedName(ev.Type); r != nil { // 4
		return Admission{}, r
	}
	if r := notParked(st); r != nil { // 5, 6
		return Admission{}, r
	}
	park := parkOf(st)
	if ev.Type == event.TimerFired { // 7, for a timer; its answer is the recorded wakeAt
		return admitTimer(st, park, ev, nowMs)
	}
	waitID, r := gateAnswered(st, park, ev.Type) // 7
	if r != nil {
		return Admission{}, r
	}
	if IsNullJSON(ev.Payload) && st.Variables.FailedWhileParked { // 8
		return Admission{}, refused(RuleNullAfterFailure, ReasonNullAfterFailure, park.On,
			"a step failed while the execution was parked, so a null answer would be taken for none; answer with a value")
	}
	payload, r := shape(schemas, park, ev) // 9
	if r != nil {
		return Admission{}, r
	}
	return Admission{Action: ActionAnswer, EventType: ev.Type, Payload: payload, WaitID: waitID}, nil
}

// AdmitRedrive is rule 2, the re-drive of a crashed execution
// (EXECUTION_RECOVERED, the one non-gate resume): admitted for a running or
// pending execution only, refused (not-recoverable) on a parked or ended
// one.
func AdmitRedrive(st fold.State) (Admission, error) {
	switch st.Status {
	case fold.StatusRunning, fold.StatusPending:
		return Admission{Action: ActionRedrive, reason: redriveReason}, nil
	case fold.StatusSuspended:
		gate := parkOf(st).On
		return Admission{}, refused(RuleRedrive, ReasonNotRecoverable, gate,
			"only a running execution whose driver stopped is re-driven; it is parked on gate "+strconv.Quote(gate)+": answer that gate instead")
	}
	return Admission{}, refused(RuleRedrive, ReasonNotRecoverable, "",
		"only a running execution whose driver stopped is re-driven; it is "+string(st.Status)+": use ResumeAs to re-open it")
}

// AdmitVerdict checks an operator's in-doubt verdict (K9.3): the execution
// must be parked on fold.GateInDoubt for exactly v's step and attempt, and
// the log must hold the kernel's EFFECT_INDOUBT fact for that attempt
// (fold.InDoubtKey). Every refusal is PayloadInvalid at fold.GateInDoubt.
func AdmitVerdict(st fold.State, v Verdict) (Admission, error) {
	park := st.Variables.SuspendedOn
	if st.Status != fold.StatusSuspended || park == nil || park.On != fold.GateInDoubt {
		return Admission{}, invalid(RuleVerdict, fold.GateInDoubt,
			"the execution is not parked in doubt ("+describe(st)+"); a verdict answers only an in-doubt park")
	}
	if park.StepID != v.StepID || park.Attempt == nil || *park.Attempt != v.Attempt {
		return Admission{}, invalid(RuleVerdict, fold.GateInDoubt,
			"the verdict names "+attemptName(v.StepID, &v.Attempt)+" but the park is in doubt about "+
				attemptName(park.StepID, park.Attempt)+"; give the verdict for that attempt")
	}
	if _, fact := st.Variables.InDoubt[fold.InDoubtKey(v.StepID, v.Attempt)]; !fact {
		return Admission{}, invalid(RuleVerdict, fold.GateInDoubt,
			"the log holds no EFFECT_INDOUBT fact for "+attemptName(v.StepID, &v.Attempt)+
				", so no verdict may be honoured; inspect the log before resolving")
	}
	if v.Done {
		v.Output = orNull(v.Output)
		if !validJSON(v.Output) {
			return Admission{}, invalid(RuleVerdict, fold.GateInDoubt,
				"the verdict's output is not UTF-8 JSON; give the step's output as one JSON value")
		}
	} else {
		v.Output = nil
	}
	return Admission{Action: ActionVerdict, verdict: v}, nil
}

// AdmitResumeAs is the ingress gate of resumeAs (K11.3). Onto a parked
// execution ev answers the recorded gate under every rule Admit applies,
// with the TARGET flow's schemas. Onto a crashed (running or pending) or an
// ended execution only the kernel namespace applies (rules 1 and 4, when
// ev.Type is set): a crashed one is re-driven (ActionRedrive), an ended one
// re-opened (ActionReopen); ev's payload is not recorded.
func AdmitResumeAs(st fold.State, schemas map[string]*schema.Schema, ev Event, nowMs int64) (Admission, error) {
	if st.Status == fold.StatusSuspended {
		return Admit(st, schemas, ev, nowMs)
	}
	if ev.Type != "" {
		if r := kernelType(ev.Type); r != nil {
			return Admission{}, r
		}
		if r := reservedName(ev.Type); r != nil {
			return Admission{}, r
		}
	}
	if st.Status.Terminal() {
		return Admission{Action: ActionReopen}, nil
	}
	return Admission{Action: ActionRedrive, reason: resumeAsReason}, nil
}

// kernelType is rule 1.
func kernelType(t string) *Refusal {
	if t == event.TimerFired || t == event.ExecutionRecovered || !event.IsKnown(t) {
		return nil
	}
	return refused(RuleKernelType, ReasonKernelEventType, "",
		"a resume cannot carry a kernel event type, which would forge the kernel's own record; answer the gate by its name")
}

// inDoubtPark is rule 3: at an in-doubt park anything but a verdict is
// refused as an invalid answer, the reserved gate's own name included.
func inDoubtPark(st fold.State) *Refusal {
	park := st.Variables.SuspendedOn
	if st.Status != fold.StatusSuspended || park == nil || park.On != fold.GateInDoubt {
		return nil
	}
	return invalid(RuleInDoubt, fold.GateInDoubt,
		"the execution is parked in doubt about "+attemptName(park.StepID, park.Attempt)+
			"; only an operator verdict for that attempt answers it (ResolveInDoubt)")
}

// reservedName is rule 4. fold.GateDiverged is the one reserved name a
// caller resumes: the operator's go-ahead once the code is fixed.
func reservedName(t string) *Refusal {
	if t == fold.GateDiverged || !strings.HasPrefix(t, ReservedPrefix) {
		return nil
	}
	return refused(RuleReserved, ReasonKernelEventType, "",
		"event types starting with "+ReservedPrefix+" are reserved for the kernel; answer the gate by its name (a timer wakes a sleep, a verdict answers an in-doubt park)")
}

// notParked is rules 5 and 6.
func notParked(st fold.State) *Refusal {
	switch {
	case st.Status.Terminal():
		return refused(RuleTerminal, ReasonTerminal, "",
			"the execution has ended ("+string(st.Status)+"); use ResumeAs to re-open it")
	case st.Status != fold.StatusSuspended:
		return refused(RuleParked, ReasonNotSuspended, "",
			"the execution is not parked yet ("+string(st.Status)+"); retry once it is")
	}
	return nil
}

// gateAnswered is rule 7 for a gate answer: eventType must be the parked
// gate, or the gate of one of a Select's waits while none is answered (then
// its wait id is returned).
func gateAnswered(st fold.State, park fold.Suspension, eventType string) (string, *Refusal) {
	mismatch := func(detail string) (string, *Refusal) {
		return "", refused(RuleGate, ReasonGateMismatch, park.On, detail)
	}
	if park.On != GateSelect {
		if eventType != "" && eventType == park.On {
			return "", nil
		}
		switch park.On {
		case GateSleep:
			return mismatch("the execution sleeps until its recorded wakeAt; only its timer wakes it")
		case fold.GateDiverged:
			return mismatch("the execution is parked after a replay divergence; fix the flow's code, then resume " +
				fold.GateDiverged + " with no payload")
		}
		return mismatch("the execution is parked on gate " + strconv.Quote(park.On) + "; resume with that event type")
	}
	waits := ParkWaits(st)
	if id, ok := decided(st, waits); ok {
		return mismatch("the select already has its answer (wait " + strconv.Quote(id) + ") and wakes on its own; answer its next park")
	}
	var gates []string
	for _, w := range waits {
		if w.Kind != WaitGate {
			continue
		}
		if eventType != "" && w.On == eventType {
			return w.WaitID, nil
		}
		gates = append(gates, strconv.Quote(w.On))
	}
	if len(gates) == 0 {
		return mismatch("the execution is parked on a select with no gate wait; a message or its timer answers it")
	}
	return mismatch("the execution is parked on a select; resume one of its gates: " + strings.Join(gates, ", "))
}

// admitTimer is rule 7 for TIMER_FIRED: the park (or one of a Select's
// timer waits, while none is answered) must have recorded exactly the
// fired wakeAt, and it must be due. An untimed gate is never woken by a
// timer. The recorded answer is the canonical {"wakeAt":…}.
func admitTimer(st fold.State, park fold.Suspension, ev Event, nowMs int64) (Admission, error) {
	notAllowed := func(detail string) (Admission, error) {
		return Admission{}, refused(RuleGate, ReasonTimerNotAllowed, park.On, detail)
	}
	fired, ok := DecodeTimerFired(ev.Payload)
	if !ok {
		return notAllowed(`a timer resume carries the wakeAt it fires, as {"wakeAt": <epoch ms>}`)
	}
	waitID := ""
	if park.On == GateSelect {
		waits := ParkWaits(st)
		if id, done := decided(st, waits); done {
			return notAllowed("the select already has its answer (wait " + strconv.Quote(id) + "); the timer is stale")
		}
		found := false
		for _, w := range waits {
			if w.Kind == WaitTimer && w.WakeAt != nil && *w.WakeAt == fired.WakeAt {
				waitID, found = w.WaitID, true
				break
			}
		}
		if !found {
			return notAllowed("no timer wait of the select was recorded at that wakeAt; a timer fires only a recorded wakeAt")
		}
	} else {
		switch {
		case park.WakeAt == nil:
			return notAllowed("gate " + strconv.Quote(park.On) + " recorded no wakeAt, so no timer wakes it; resume the gate itself")
		case *park.WakeAt != fired.WakeAt:
			return notAllowed("gate " + strconv.Quote(park.On) + " recorded another wakeAt; a timer fires only the wakeAt its park recorded")
		}
	}
	if nowMs < fired.WakeAt {
		return notAllowed("the recorded wakeAt is still in the future; fire the timer once it is due")
	}
	wakeAt := fired.WakeAt
	return Admission{Action: ActionAnswer, EventType: event.TimerFired, Payload: timerPayload(wakeAt),
		WaitID: waitID, WakeAt: &wakeAt}, nil
}

// shape is rule 9: a reserved gate's answer is null (status only), the
// payload is UTF-8 JSON, and a resume schema declared for the event type
// parses it into the value to record.
func shape(schemas map[string]*schema.Schema, park fold.Suspension, ev Event) (json.RawMessage, *Refusal) {
	if park.On == fold.GateDiverged {
		if !IsNullJSON(ev.Payload) {
			return nil, invalid(RuleShape, fold.GateDiverged,
				"a diverged park takes no value (it would be served to the flow's next gate); resume "+
					fold.GateDiverged+" with no payload once the code is fixed")
		}
		return json.RawMessage("null"), nil
	}
	payload := orNull(ev.Payload)
	if !validJSON(payload) {
		return nil, invalid(RuleShape, ev.Type, "the payload is not UTF-8 JSON; send one JSON value")
	}
	s, _ := ForGate(schemas, ev.Type)
	if s == nil {
		return payload, nil
	}
	parsed, err := s.Parse(payload)
	if err != nil {
		r := invalid(RuleShape, ev.Type, err.Error()+"; send a payload the gate's resume schema accepts")
		var ie *schema.InvalidError
		if errors.As(err, &ie) {
			r.Violations = ie.Violations
		}
		return nil, r
	}
	return parsed, nil
}

// ForGate is the entry of m for gate: the exact one, else the family
// ("prefix*") with the longest prefix of gate. It is how resume schemas are
// found, so the gate, the wire and the inspector agree.
func ForGate[V any](m map[string]V, gate string) (V, bool) {
	if v, ok := m[gate]; ok {
		return v, true
	}
	var best V
	bestLen := -1
	for key, v := range m { //loom:order-independent the longest prefix is unique
		prefix, family := strings.CutSuffix(key, "*")
		if family && len(prefix) > bestLen && strings.HasPrefix(gate, prefix) {
			best, bestLen = v, len(prefix)
		}
	}
	return best, bestLen >= 0
}

func validJSON(raw json.RawMessage) bool { return utf8.Valid(raw) && json.Valid(raw) }

// parkOf is the recorded park, or an empty one.
func parkOf(st fold.State) fold.Suspension {
	if st.Variables.SuspendedOn == nil {
		return fold.Suspension{}
	}
	return *st.Variables.SuspendedOn
}

// describe says where st is, for a refusal's detail.
func describe(st fold.State) string {
	if st.Status == fold.StatusSuspended {
		return "parked on gate " + strconv.Quote(parkOf(st).On)
	}
	return string(st.Status)
}

func attemptName(stepID string, attempt *int64) string {
	s := "step " + strconv.Quote(stepID)
	if attempt != nil {
		s += " attempt " + strconv.FormatInt(*attempt, 10)
	}
	return s
}
