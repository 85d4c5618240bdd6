package dst

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom"
)

// OpKind names what one operation of a run does.
type OpKind string

// The operations. Each is re-resolved against the world when it runs: an
// operation whose target is not in the state it needs (a gate answered
// already, an execution never started because a shrink removed its start)
// is skipped, and the run goes on.
const (
	// OpStart starts Exec as an execution of Flow with Payload as input.
	OpStart OpKind = "start"
	// OpAnswer resumes Exec's gate Name with Payload.
	OpAnswer OpKind = "answer"
	// OpSend sends Payload to Exec's inbox topic Name.
	OpSend OpKind = "send"
	// OpAdvance moves the virtual clock Millis forward, firing on the way,
	// one at a time and in wake order, every timer that falls due.
	OpAdvance OpKind = "advance"
	// OpCrash kills the process while it is at rest and starts the next one
	// on the surviving durable stores, then recovers.
	OpCrash OpKind = "crash"
	// OpRecover runs a recovery pass in the live process (what its periodic
	// recovery would do), re-driving what an aborted drive left running.
	OpRecover OpKind = "recover"
	// OpCancel cancels Exec.
	OpCancel OpKind = "cancel"
	// OpResolve answers Exec's in-doubt park as an operator would, from what
	// the world saw its effect do: done with its output when it acted, run
	// again when it did not.
	OpResolve OpKind = "resolve"
)

// Op is one operation of a run's schedule.
type Op struct {
	Kind OpKind
	// Exec is the execution the operation acts on.
	Exec string
	// Flow is the flow OpStart starts.
	Flow string
	// Name is the gate of OpAnswer or the topic of OpSend.
	Name string
	// Payload is the input of OpStart, the answer of OpAnswer, the message
	// of OpSend (JSON).
	Payload json.RawMessage
	// Millis is how far OpAdvance moves the clock.
	Millis int64
}

// String renders op as one line of a schedule's text form.
func (op Op) String() string {
	switch op.Kind {
	case OpStart:
		return fmt.Sprintf("start %s %s %s", op.Exec, op.Flow, payloadText(op.Payload))
	case OpAnswer, OpSend:
		return fmt.Sprintf("%s %s %s %s", op.Kind, op.Exec, op.Name, payloadText(op.Payload))
	case OpAdvance:
		return fmt.Sprintf("advance %d", op.Millis)
	case OpCrash, OpRecover:
		return string(op.Kind)
	default:
		return fmt.Sprintf("%s %s", op.Kind, op.Exec)
	}
}

func payloadText(p json.RawMessage) string {
	if len(p) == 0 {
		return "null"
	}
	return string(p)
}

// FaultKind names a fault the store layer injects.
type FaultKind string

// The faults. Append faults are keyed by the event they hit: the
// execution and the sequence of the first event of a batch the store does
// not take, so where a fault lands does not depend on how the journal
// happened to batch its events.
const (
	// FaultCrash kills the process at an append: the events of the batch
	// before the one it hits are durable (as a crash in the middle of a
	// batch leaves them), that event and the rest are not, the append fails
	// with ErrCrashed, and so does every later call about that execution;
	// the rest of the process dies at its next rest point, and the next
	// process starts on the surviving stores.
	FaultCrash FaultKind = "crash"
	// FaultReject is a transient store error at an append: the events
	// before the one it hits are durable, that event and the rest are not,
	// the append fails with ErrRejected, and the process lives on.
	FaultReject FaultKind = "reject"
	// FaultSnapshot fails a snapshot save (At is the snapshot's sequence).
	// It is ambient: drawn from the seed in every run, replays included,
	// and never listed in a schedule, since a save runs after its park is
	// durable, where the simulator cannot wait for it.
	FaultSnapshot FaultKind = "snapshot-fail"
	// FaultNotifyDrop withholds the subscription wake-up of an acknowledged
	// append holding the event at At: its followers hear of it late, as a
	// store that re-reads after a reconnect, never never.
	FaultNotifyDrop FaultKind = "notify-drop"
	// FaultNotifyDup delivers the wake-up of an acknowledged append holding
	// the event at At twice.
	FaultNotifyDup FaultKind = "notify-dup"
	// FaultEffectCrash kills the process inside the effect of a step the
	// flow declares non-idempotent, before it acts (At is the attempt):
	// its STEP_STARTED is durable and nothing after it, so the next
	// process must park the step in doubt, and the world says it never
	// ran. Only non-idempotent steps have their start durable before the
	// effect, so only they take it without the outcome depending on the
	// journal's timing.
	FaultEffectCrash FaultKind = "effect-crash"
	// FaultLeaseExpiry shows a dead process's live lease as expired before
	// its time (At is the number of the process that holds it), so
	// recovery takes the execution over at once instead of waiting out the
	// lease.
	FaultLeaseExpiry FaultKind = "lease-expiry"
)

// faultKinds lists every fault kind, in the order a schedule prints them.
var faultKinds = []FaultKind{FaultCrash, FaultReject, FaultEffectCrash, FaultSnapshot, FaultNotifyDrop, FaultNotifyDup, FaultLeaseExpiry}

// Fault is one fault that fired in a run.
type Fault struct {
	Kind FaultKind
	// Exec is the execution (or inbox stream) the fault hit.
	Exec string
	// At is where it hit: an event sequence, a process number (a lease),
	// or an attempt (an effect).
	At int64
	// Step is the step an effect fault hit ("" for the others).
	Step string
	// Op is the index of the operation during which it fired (len(Ops) for
	// the final phase, which injects nothing). It is informational: a
	// replay fires a fault wherever its execution reaches At.
	Op int
}

func (f Fault) key() faultKey { return faultKey{kind: f.Kind, exec: f.Exec, step: f.Step, at: f.At} }

// String renders f as one line of a schedule's text form.
func (f Fault) String() string {
	if f.Step != "" {
		return fmt.Sprintf("fault %s %s %d step=%s @%d", f.Kind, f.Exec, f.At, f.Step, f.Op)
	}
	return fmt.Sprintf("fault %s %s %d @%d", f.Kind, f.Exec, f.At, f.Op)
}

// faultKey identifies a fault: it fires at most once per run.
type faultKey struct {
	kind FaultKind
	exec string
	step string
	at   int64
}

// RunConfig is the runtime configuration a run drew from its seed. Every
// process of the run uses it.
type RunConfig struct {
	Durability loom.Durability
	// SnapshotEvery is loom.Config.SnapshotEvery (negative: only parks).
	SnapshotEvery int
	// Leases wires a lease store (loom.Config.Leases), without heartbeats.
	Leases bool
	// StickyParks keeps parked flows in memory (loom.Config.StickyParks at
	// its default); off, every resume replays.
	StickyParks bool
}

// String renders c as the config line of a schedule's text form.
func (c RunConfig) String() string {
	d := "write-behind"
	if c.Durability == loom.StepDurable {
		d = "step-durable"
	}
	return fmt.Sprintf("config durability=%s snapshot-every=%d leases=%t sticky=%t", d, c.SnapshotEvery, c.Leases, c.StickyParks)
}

// Schedule is everything a run did that its seed chose: the runtime
// configuration, the operations in order and the faults that fired. A
// replay of a Schedule (Simulation.Replay) runs the operations and fires
// exactly those faults, so it reproduces the run; Simulation.Shrink cuts
// one down while it still fails.
type Schedule struct {
	Seed   uint64
	Config RunConfig
	Ops    []Op
	Faults []Fault
}

// Len is the number of entries a shrink counts: operations plus faults.
func (s Schedule) Len() int { return len(s.Ops) + len(s.Faults) }

// String renders s in its text form, one entry a line, which
// ParseSchedule reads back: a test pins a shrunk failure by pasting it.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d\n%s\n", s.Seed, s.Config)
	for _, op := range s.Ops {
		b.WriteString(op.String())
		b.WriteByte('\n')
	}
	for _, f := range s.Faults {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// clone returns a copy of s whose slices are its own.
func (s Schedule) clone() Schedule {
	s.Ops = slices.Clone(s.Ops)
	s.Faults = slices.Clone(s.Faults)
	return s
}

// ErrSchedule matches every *ScheduleError.
var ErrSchedule = errors.New("dst: malformed schedule")

// ScheduleError reports a line ParseSchedule cannot read.
type ScheduleError struct {
	Line   int
	Reason string
}

func (e *ScheduleError) Error() string {
	return "dst: schedule line " + strconv.Itoa(e.Line) + ": " + e.Reason
}

// Is makes errors.Is(err, ErrSchedule) true.
func (e *ScheduleError) Is(target error) bool { return target == ErrSchedule }

// ParseSchedule reads a schedule's text form (Schedule.String). Blank
// lines and lines starting with # are skipped; a line it cannot read is a
// *ScheduleError.
func ParseSchedule(text string) (Schedule, error) {
	var s Schedule
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := s.parseLine(line); err != nil {
			return Schedule{}, &ScheduleError{Line: i + 1, Reason: err.Error()}
		}
	}
	return s, nil
}

// MustParseSchedule is ParseSchedule for a schedule pinned in a test: it
// panics on a malformed one.
func MustParseSchedule(text string) Schedule {
	s, err := ParseSchedule(text)
	if err != nil {
		panic(err)
	}
	return s
}

func (s *Schedule) parseLine(line string) error {
	word, rest, _ := strings.Cut(line, " ")
	switch word {
	case "seed":
		n, err := strconv.ParseUint(rest, 10, 64)
		s.Seed = n
		return err
	case "config":
		return s.Config.parse(rest)
	case "fault":
		f, err := parseFault(rest)
		s.Faults = append(s.Faults, f)
		return err
	}
	op, err := parseOp(OpKind(word), rest)
	s.Ops = append(s.Ops, op)
	return err
}

func (c *RunConfig) parse(rest string) error {
	for _, kv := range strings.Fields(rest) {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "durability":
			switch v {
			case "write-behind":
				c.Durability = loom.WriteBehind
			case "step-durable":
				c.Durability = loom.StepDurable
			default:
				err = fmt.Errorf("durability %q is not write-behind or step-durable", v)
			}
		case "snapshot-every":
			c.SnapshotEvery, err = strconv.Atoi(v)
		case "leases":
			c.Leases, err = strconv.ParseBool(v)
		case "sticky":
			c.StickyParks, err = strconv.ParseBool(v)
		default:
			err = fmt.Errorf("unknown config key %q", k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func parseOp(kind OpKind, rest string) (Op, error) {
	op := Op{Kind: kind}
	fields := strings.SplitN(rest, " ", 3)
	need := func(n int) error {
		if len(fields) < n || fields[n-1] == "" {
			return fmt.Errorf("%s needs %d fields, has %q", kind, n, rest)
		}
		return nil
	}
	switch kind {
	case OpStart, OpAnswer, OpSend:
		if err := need(3); err != nil {
			return op, err
		}
		op.Exec = fields[0]
		if kind == OpStart {
			op.Flow = fields[1]
		} else {
			op.Name = fields[1]
		}
		if !json.Valid([]byte(fields[2])) {
			return op, fmt.Errorf("%s payload %q is not JSON", kind, fields[2])
		}
		op.Payload = json.RawMessage(fields[2])
	case OpAdvance:
		ms, err := strconv.ParseInt(rest, 10, 64)
		op.Millis = ms
		return op, err
	case OpCrash, OpRecover:
		if rest != "" {
			return op, fmt.Errorf("%s takes no fields", kind)
		}
	case OpCancel, OpResolve:
		if err := need(1); err != nil {
			return op, err
		}
		op.Exec = rest
	default:
		return op, fmt.Errorf("unknown entry %q", kind)
	}
	return op, nil
}

func parseFault(rest string) (Fault, error) {
	fields := strings.Fields(rest)
	if len(fields) < 3 {
		return Fault{}, fmt.Errorf("fault needs kind, execution and position, has %q", rest)
	}
	f := Fault{Kind: FaultKind(fields[0]), Exec: fields[1]}
	if !slices.Contains(faultKinds, f.Kind) {
		return f, fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	at, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil {
		return f, err
	}
	f.At = at
	for _, field := range fields[3:] {
		switch {
		case strings.HasPrefix(field, "step="):
			f.Step = strings.TrimPrefix(field, "step=")
		case strings.HasPrefix(field, "@"):
			op, err := strconv.Atoi(strings.TrimPrefix(field, "@"))
			if err != nil {
				return f, fmt.Errorf("fault op %q: %w", field, err)
			}
			f.Op = op
		default:
			return f, fmt.Errorf("fault field %q is neither step=… nor @op", field)
		}
	}
	if (f.Kind == FaultEffectCrash) != (f.Step != "") {
		return f, fmt.Errorf("fault %s: step= is for %s faults and required by them", f.Kind, FaultEffectCrash)
	}
	return f, nil
}
