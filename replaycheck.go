package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/divergence"
	"github.com/loom-kernel/loom/internal/journal"
	"github.com/loom-kernel/loom/store"
)

// Replay against new code (deploy simulation). CheckReplay drives a
// registered flow over a stored log the way a resume or a recovery would —
// recorded outcomes served, recorded answers given to their gates — but
// stops at the first thing the log does not hold: a step or decision that
// would run live, a park, an end, any event it would append. Nothing runs
// and nothing is written; the report says whether the candidate code
// reaches that frontier where the log says the execution stands.

// ReplayVerdict is what CheckReplay found for one execution.
type ReplayVerdict string

const (
	// ReplayCompatible: the candidate serves the whole log and stands where
	// the log does (parked on the same gate, ended with the same outcome,
	// or, for a running execution, continues with work the log does not
	// hold yet).
	ReplayCompatible ReplayVerdict = "compatible"
	// ReplayDiverged: the candidate parts from the log at Sequence — it
	// issues another step there, skips a logged step, gives a recorded
	// answer to another gate, needs work the log does not hold before the
	// point the log stands at, or ends with another outcome.
	ReplayDiverged ReplayVerdict = "diverged"
	// ReplayParksDifferently: the candidate serves the log but parks where
	// the log does not (another gate or wait, or a park where the log
	// ended), or ends where the log is parked.
	ReplayParksDifferently ReplayVerdict = "parks-differently"
	// ReplayPinMismatch: the log's code pin is not the candidate flow's
	// fingerprint nor one it declares compatible (K11); the runtime would
	// refuse to drive it. Detail says how the candidate replays otherwise.
	ReplayPinMismatch ReplayVerdict = "code-pin-mismatch"
	// ReplayUnknownFlow: no candidate flow has the log's flow id.
	ReplayUnknownFlow ReplayVerdict = "unknown-flow"
	// ReplayUnreadable: the log cannot be folded (empty, not contiguous,
	// or an event the fold refuses).
	ReplayUnreadable ReplayVerdict = "unreadable"
)

// ReplayReport is CheckReplay's verdict on one execution.
type ReplayReport struct {
	ExecutionID string        `json:"executionId"`
	FlowID      string        `json:"flowId"`
	Status      string        `json:"status"` // the log's status
	Length      int           `json:"length"` // the events checked
	Verdict     ReplayVerdict `json:"verdict"`
	// Sequence is where the candidate parts from the log (the log's event
	// there is described by Expected); absent when it does not.
	Sequence *int64 `json:"sequence,omitempty"`
	Expected string `json:"expected,omitempty"`
	Got      string `json:"got,omitempty"`
	// Path is the candidate's code path at the point it parted: the call
	// site in the flow's code, innermost first.
	Path string `json:"path,omitempty"`
	// RecordedPin and RegisteredPin are, on a code-pin-mismatch, the
	// execution's recorded code pin ("" when it started unpinned) and the
	// candidate flow's CodeFingerprint.
	RecordedPin   string `json:"recordedPin,omitempty"`
	RegisteredPin string `json:"registeredPin,omitempty"`
	Detail        string `json:"detail"`
}

// Compatible reports whether the new code may take the execution over.
func (r ReplayReport) Compatible() bool { return r.Verdict == ReplayCompatible }

func (r ReplayReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s, %s): %s", r.ExecutionID, r.FlowID, r.Status, r.Verdict)
	if r.Sequence != nil {
		fmt.Fprintf(&b, " at sequence %d", *r.Sequence)
	}
	if r.Expected != "" || r.Got != "" {
		fmt.Fprintf(&b, ": expected %s, got %s", orNone(r.Expected), orNone(r.Got))
	}
	if r.Path != "" {
		fmt.Fprintf(&b, " (at %s)", r.Path)
	}
	if r.Detail != "" {
		b.WriteString(" — " + r.Detail)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// CheckReplay checks one execution's log, as read from a store, against
// the flows registered on rt: see ReplayVerdict. It appends nothing, runs
// no step, decision or effect, arms no timer and starts no execution, on
// rt's stores or any other; rt's Events store is only read (an inbox
// stream a select park would look at). Give it a runtime built for the
// check — the candidate flows, the app's Features, memory stores — or the
// app's own. A drive the candidate cannot finish (a panic, a cancelled
// ctx) is reported as diverged with the reason.
func (rt *Runtime) CheckReplay(ctx context.Context, log []event.Envelope) ReplayReport {
	rep := ReplayReport{Length: len(log), Status: "unknown"}
	if len(log) == 0 {
		rep.Verdict, rep.Detail = ReplayUnreadable, "the log is empty"
		return rep
	}
	rep.ExecutionID = log[0].ExecutionID
	rep.FlowID = log[len(log)-1].WorkflowID // a ResumeAs moves an execution
	st, err := fold.FoldChecked(fold.Initial(), log)
	if err != nil {
		rep.Verdict, rep.Detail = ReplayUnreadable, err.Error()
		return rep
	}
	rep.Status = string(st.Status)
	flow, ok := rt.flows[rep.FlowID]
	if !ok {
		rep.Verdict, rep.Detail = ReplayUnknownFlow, rt.unknownFlow(rep.FlowID).Error()
		return rep
	}
	f := rt.verifyDrive(ctx, rep.ExecutionID, flow, st)
	judged := judgeReplay(rep, st, f)
	if err := checkCodePin(rep.ExecutionID, st, flow); err != nil {
		otherwise := "otherwise it replays as " + string(judged.Verdict)
		if judged.Compatible() {
			otherwise = "otherwise it replays compatibly, so declaring the pin compatible is safe"
		}
		judged.Verdict, judged.Detail = ReplayPinMismatch, err.Error()+"; "+otherwise
		judged.RecordedPin, judged.RegisteredPin = st.Variables.CodeHash, flow.CodeFingerprint
	}
	return judged
}

// CheckExecution is CheckReplay over an execution of rt's own store: its
// whole log, with the events Compact moved into Config.Archive in their
// place, against the flows registered on rt. It is what an operator's
// console asks the running app ("does this log replay under the code
// deployed now?"), and like CheckReplay it writes nothing. With an
// Authorizer it is a "query", scoped to the caller's tenant like every
// read. An execution the store does not hold is ErrExecutionNotFound; a
// compacted one without Config.Archive is a *NotConfiguredError.
func (rt *Runtime) CheckExecution(ctx context.Context, id string) (ReplayReport, error) {
	if err := event.ValidateID("execution id", id); err != nil {
		return ReplayReport{}, err
	}
	if err := rt.authorize(ctx, "query", id, "", true); err != nil {
		return ReplayReport{}, err
	}
	log, err := store.Read(ctx, rt.cfg.Events, id)
	if err != nil {
		return ReplayReport{}, err
	}
	if len(log) == 0 {
		return ReplayReport{}, fmt.Errorf("%w: %q", ErrExecutionNotFound, id)
	}
	if len(log) > 1 && log[1].Sequence != 1 { // compacted: #0, then the kept tail
		if rt.cfg.Archive == nil {
			return ReplayReport{}, &NotConfiguredError{Field: "Archive",
				Need: "checking the compacted log of " + strconv.Quote(id) + " (the events #1.." + strconv.FormatInt(log[1].Sequence-1, 10) + " are archived)"}
		}
		moved, err := rt.cfg.Archive.ReadArchived(ctx, id, 1, log[1].Sequence)
		if err != nil {
			return ReplayReport{}, err
		}
		log = append(append([]event.Envelope{log[0]}, moved...), log[1:]...)
	}
	return rt.CheckReplay(ctx, log), nil
}

// frontierKind is what stopped a verifying drive.
type frontierKind int

const (
	frontierStep     frontierKind = iota + 1 // a step would run live
	frontierDecision                         // a decision would be taken live
	frontierPark                             // the drive would park
	frontierEnd                              // the flow returned (or failed)
	frontierAppend                           // another event would be appended
	frontierDiverged                         // the divergence detector spoke
	frontierAborted                          // the drive could not go on
)

// frontier is where a verifying drive stopped: the first thing the log
// does not hold.
type frontier struct {
	kind    frontierKind
	id      string // a step's or decision's id
	typ     string // the event type it would append
	park    suspendPayload
	payload any // the terminal event's payload
	status  fold.Status
	// a divergence: what the log has and where, what the re-run issued
	want    string
	wantSeq int64
	got     string
	detail  string
	path    string
}

// verifier collects a verifying drive's first frontier.
type verifier struct {
	mu    sync.Mutex
	first *frontier
}

func (v *verifier) record(f frontier) {
	v.mu.Lock()
	if v.first == nil {
		v.first = &f
	}
	v.mu.Unlock()
}

func (v *verifier) reached() *frontier {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.first
}

// reach stops a verifying drive at f, unwinding the calling goroutine.
func (r *drive) reach(f frontier) {
	f.path = callerPath()
	r.verify.record(f)
	r.root.stop.Store(true)
	runtime.Goexit()
}

// verifying says the drive is CheckReplay's: it must stop before doing
// anything the log does not hold.
func (r *drive) verifying() bool { return r.verify != nil }

// verifyDrive runs flow over st until its first frontier.
func (rt *Runtime) verifyDrive(ctx context.Context, id string, flow *Flow, st fold.State) frontier {
	j := journal.New(refuseWrites{rt.cfg.Events}, id, flow.ID, st,
		journal.WithClock(func() int64 { return rt.cfg.Clock.Now().UnixMilli() }), journal.WithIDs(rt.cfg.NewID))
	defer j.Settle()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &drive{rt: rt, x: &execution{id: id, flow: flow, done: make(chan struct{})}, j: j, flow: flow,
		ctx: ctx, cancel: cancel, root: &scope{ctx: ctx, cancel: cancel}, snapshotAt: -1,
		issued: map[string]issue{}, verify: &verifier{}}
	if len(st.Frames) > 0 || len(st.Variables.ResumePayloads) > 0 {
		r.div = divergence.New(st)
	}
	o := r.runBody(st.Variables.Input)
	if f := r.verify.reached(); f != nil {
		// A step the log holds with no outcome replay serves (an untyped
		// failure) is where the check ends: a resume runs it again, and the
		// logged work after it was done on that failure's account, which
		// the next run may not repeat. Nothing past it is judged removed.
		_, logged := st.Frames[f.id]
		rerun := f.kind == frontierStep && logged
		if f.kind != frontierDiverged && r.div != nil && !rerun {
			// A logged step the candidate never issued before stopping:
			// it was removed (or moved after the frontier).
			want, seq, ok := r.div.Next()
			if ok && !(f.kind == frontierStep && f.id == want) && !(f.kind == frontierPark && f.park.StepID == want) {
				return frontier{kind: frontierDiverged, want: "step " + strconv.Quote(want), wantSeq: seq,
					got: describeFrontier(*f), path: f.path,
					detail: "the log's step " + strconv.Quote(want) + " was not issued by the candidate"}
			}
		}
		return *f
	}
	reason := "the drive stopped without reaching a frontier"
	if o.err != nil {
		reason = o.err.Error()
	}
	return frontier{kind: frontierAborted, detail: reason}
}

// refuseWrites is the event store a verifying drive's journal holds: reads
// go through, an append is refused (the drive stops before any; one that
// slipped through would be a kernel bug, reported, never written).
type refuseWrites struct{ store.EventStore }

var errVerifyWrite = errors.New("loom: CheckReplay tried to append to a log (a kernel bug: please report it)")

func (refuseWrites) Append(context.Context, string, int64, []event.Envelope) error {
	return errVerifyWrite
}

// describeFrontier names a frontier for a report.
func describeFrontier(f frontier) string {
	switch f.kind {
	case frontierStep:
		return "step " + strconv.Quote(f.id)
	case frontierDecision:
		return "decision " + strconv.Quote(f.id)
	case frontierPark:
		return describePark(f.park.On)
	case frontierEnd:
		return describeEnd(f.status, f.payload)
	case frontierAppend:
		return f.typ
	case frontierDiverged:
		return f.got
	}
	return "no frontier"
}

func describePark(on string) string {
	switch on {
	case gateSelect:
		return "a wait for messages or timers"
	case fold.GateDiverged:
		return "the divergence gate"
	}
	if strings.HasPrefix(on, reservedPrefix) {
		return "a park on " + strconv.Quote(on)
	}
	return "a park on gate " + strconv.Quote(on)
}

func describeEnd(status fold.Status, payload any) string {
	if status == fold.StatusCompleted {
		if m, ok := payload.(map[string]any); ok {
			if out, ok := m["output"].(json.RawMessage); ok {
				return "completion with output " + bounded(string(out))
			}
		}
		return "completion"
	}
	if status == fold.StatusContinued {
		return "continue-as-new"
	}
	if m, ok := payload.(map[string]any); ok {
		if e, ok := m["error"].(map[string]any); ok {
			if msg, ok := e["message"].(string); ok {
				return "failure " + strconv.Quote(bounded(msg))
			}
		}
	}
	return string(status)
}

// judgeReplay turns the frontier the candidate reached into a verdict on
// the log's state st.
func judgeReplay(rep ReplayReport, st fold.State, f frontier) ReplayReport {
	at := func(seq int64, expected string) {
		rep.Sequence, rep.Expected = &seq, expected
		rep.Got, rep.Path = describeFrontier(f), f.path
	}
	logStands := func() (int64, string) { // where the log stands, described
		switch st.Status {
		case fold.StatusSuspended:
			if p := st.Variables.SuspendedOn; p != nil {
				return p.Seq, describePark(p.On)
			}
		case fold.StatusCompleted:
			return st.Sequence, "completion with output " + bounded(string(st.Variables.Output))
		}
		return st.Sequence, string(st.Status)
	}
	switch f.kind {
	case frontierDiverged:
		rep.Verdict = ReplayDiverged
		rep.Sequence, rep.Expected, rep.Got, rep.Path, rep.Detail = &f.wantSeq, f.want, f.got, f.path, f.detail
		return rep
	case frontierAborted:
		seq, stands := logStands()
		rep.Verdict, rep.Sequence, rep.Expected, rep.Got = ReplayDiverged, &seq, stands, "no frontier"
		rep.Detail = "the candidate could not replay the log: " + f.detail
		return rep
	}
	switch st.Status {
	case fold.StatusRunning, fold.StatusPending:
		// The log holds no claim about what comes next: new work, a park
		// or an end past the recorded prefix is what a recovery would do.
		rep.Verdict, rep.Detail = ReplayCompatible, "serves the log; a recovery would go on with "+describeFrontier(f)
		return rep
	case fold.StatusCancelled:
		rep.Verdict, rep.Detail = ReplayCompatible, "serves the log up to its cancellation"
		return rep
	}
	seq, stands := logStands()
	switch f.kind {
	case frontierStep:
		if _, logged := st.Frames[f.id]; logged {
			// A step the log records with no outcome replay serves (an
			// untyped failure): a resume runs it again, under any code.
			rep.Verdict = ReplayCompatible
			rep.Detail = "serves the log up to step " + strconv.Quote(f.id) + ", which the log holds with no outcome replay serves (a resume runs it again); checked up to there"
			return rep
		}
		rep.Verdict = ReplayDiverged
		at(seq, stands)
		rep.Detail = "the candidate needs a step the log does not hold before the point the log stands at; it would run on resume"
	case frontierDecision:
		rep.Verdict = ReplayDiverged
		at(seq, stands)
		rep.Detail = "the candidate takes a decision the log does not hold before the point the log stands at"
	case frontierAppend:
		rep.Verdict = ReplayDiverged
		at(seq, stands)
		rep.Detail = "the candidate would append " + f.typ + " before the point the log stands at"
	case frontierPark:
		if p := st.Variables.SuspendedOn; st.Status == fold.StatusSuspended && p != nil && p.On == f.park.On {
			rep.Verdict, rep.Detail = ReplayCompatible, "serves the log and parks where it is parked"
			return rep
		}
		rep.Verdict = ReplayParksDifferently
		at(seq, stands)
		rep.Detail = "the candidate serves the log but stands elsewhere"
	case frontierEnd:
		if st.Status == fold.StatusSuspended {
			rep.Verdict = ReplayParksDifferently
			at(seq, stands)
			rep.Detail = "the candidate ends where the log is parked"
			return rep
		}
		if sameEnd(st, f) {
			rep.Verdict, rep.Detail = ReplayCompatible, "serves the log and ends as it did"
			return rep
		}
		rep.Verdict = ReplayDiverged
		at(seq, stands)
		rep.Detail = "the candidate ends otherwise than the log"
	}
	return rep
}

// sameEnd says the candidate's end f is the log's: the same status and,
// canonically, the same output or error message.
func sameEnd(st fold.State, f frontier) bool {
	if f.status != st.Status {
		return false
	}
	m, _ := f.payload.(map[string]any)
	switch st.Status {
	case fold.StatusCompleted:
		out, _ := m["output"].(json.RawMessage)
		return canonicalEqual(out, st.Variables.Output)
	case fold.StatusFailed:
		e, _ := m["error"].(map[string]any)
		msg, _ := e["message"].(string)
		var logged struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(st.Variables.Error, &logged)
		return msg == logged.Message
	}
	return true
}

func canonicalEqual(a, b json.RawMessage) bool {
	ca, errA := event.Canonical(orNull(a))
	cb, errB := event.Canonical(orNull(b))
	return errA == nil && errB == nil && string(ca) == string(cb)
}

// callerPath is the flow code's call stack at a frontier: the frames
// outside the kernel's own package, innermost first, at most three.
func callerPath() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var out []string
	for len(out) < 3 {
		fr, more := frames.Next()
		if !kernelFrame(fr.Function) && fr.File != "" {
			out = append(out, fmt.Sprintf("%s:%d %s", shortFile(fr.File), fr.Line, shortFunc(fr.Function)))
		}
		if !more {
			break
		}
	}
	return strings.Join(out, " ← ")
}

// kernelFrame says fn is the kernel's (this package, not its tests) or
// the Go runtime's.
func kernelFrame(fn string) bool {
	return strings.HasPrefix(fn, "runtime.") ||
		strings.HasPrefix(fn, "github.com/loom-kernel/loom.") && !strings.Contains(fn, "_test.")
}

func shortFile(path string) string {
	parts := strings.Split(path, "/")
	if len(parts) > 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, "/")
}

func shortFunc(fn string) string {
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		return fn[i+1:]
	}
	return fn
}
