package goldentest

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

// FlowFunc builds the flow a process of a world registers. Every process
// of one world gets the world's Env, so the counts span a crash.
type FlowFunc func(env *Env) *loom.Flow

// Env is what a golden flow reports to, and how the scenario reaches into
// it: it counts every effect invocation (by the attempt's step id) and
// every decider call, keeps the errors the flow chose to report, and kills
// the process when the scenario says the process died during a step. It is
// safe for concurrent use (Parallel branches report at once).
type Env struct {
	mu        sync.Mutex
	effects   Counts
	decisions Counts
	observed  []error
	crashStep string
	crashed   chan struct{}
	also      []*loom.Flow
}

// Also registers flows beside the one the FlowFunc returns, in every
// process of the world: the target of a ResumeAs (AnswerOnto). A FlowFunc
// calls it while it builds its flow, with flows built on the same Env.
func (e *Env) Also(flows ...*loom.Flow) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.also = append([]*loom.Flow(nil), flows...)
}

// Flows returns main and the flows Also registered: what a runtime of the
// world registers.
func (e *Env) Flows(main *loom.Flow) []*loom.Flow {
	return append([]*loom.Flow{main}, e.extraFlows()...)
}

func (e *Env) extraFlows() []*loom.Flow {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*loom.Flow(nil), e.also...)
}

// NewEnv returns an Env that has counted nothing. A world makes its own;
// a test needs one only to build a flow outside a world (for its id).
func NewEnv() *Env {
	return &Env{effects: Counts{}, decisions: Counts{}}
}

// Effect counts one invocation of the running attempt's effect; a golden
// step calls it first thing (ctx is the effect's). When the scenario kills
// the process during this step, Effect signals the world and blocks until
// the runtime is closed under it, returning ctx's error, so the step's
// outcome is never recorded.
func (e *Env) Effect(ctx context.Context) error {
	id := loom.EffectContext(ctx).StepID
	e.mu.Lock()
	e.effects[id]++
	crash := e.crashStep == id
	if crash {
		e.crashStep = ""
		close(e.crashed)
	}
	e.mu.Unlock()
	if crash {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// Decided counts one call of the decider of decision id; a golden decider
// calls it first thing.
func (e *Env) Decided(id string) {
	e.mu.Lock()
	e.decisions[id]++
	e.mu.Unlock()
}

// Observe keeps err, an error the flow saw, for the test to inspect.
func (e *Env) Observe(err error) {
	e.mu.Lock()
	e.observed = append(e.observed, err)
	e.mu.Unlock()
}

// Effects returns a copy of the effect counts, by step id.
func (e *Env) Effects() Counts {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.effects)
}

// Observed returns the errors the flow observed, in order.
func (e *Env) Observed() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.observed)
}

// armCrash makes the next invocation of step's effect kill the process;
// the channel closes when it runs.
func (e *Env) armCrash(step string) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.crashStep, e.crashed = step, make(chan struct{})
	return e.crashed
}

// Counts is how often something ran, by id.
type Counts map[string]int

// String lists the counts in id order: [a×1 b×2].
func (c Counts) String() string {
	keys := slices.Sorted(maps.Keys(c))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "×" + strconv.Itoa(c[k])
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// CheckCounts asserts that every effect of env ran exactly once per attempt
// tail records (STEP_STARTED, STEP_RETRYING) and every decider once per
// flow DECISION_RECORDED, and nothing else ran: what the log held before
// tail was served, not run again. A mismatch fails the test, naming mode.
func CheckCounts(t testing.TB, mode string, tail []event.Envelope, env *Env) {
	t.Helper()
	attempts, decisions := Counts{}, Counts{}
	for _, e := range tail {
		var p struct {
			StepID     string `json:"stepId"`
			DecisionID string `json:"decisionId"`
		}
		_ = json.Unmarshal(e.PayloadOrNull(), &p)
		switch {
		case e.Type == event.StepStarted || e.Type == event.StepRetrying:
			attempts[p.StepID]++
		case e.Type == event.DecisionRecorded && !strings.HasPrefix(p.DecisionID, "__loom_"):
			decisions[p.DecisionID]++
		}
	}
	effects, decided := env.Effects(), env.decisionCounts()
	if !maps.Equal(attempts, effects) {
		t.Errorf("%s: effects ran %v, the log records attempts %v", mode, effects, attempts)
	}
	if !maps.Equal(decisions, decided) {
		t.Errorf("%s: deciders ran %v, the log records decisions %v", mode, decided, decisions)
	}
}

func (e *Env) decisionCounts() Counts {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.decisions)
}
