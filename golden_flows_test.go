package loom_test

// The kernel's golden histories: the flows, what a recording does, and for
// each bad history what today's code must do with it. Adding one: write
// the flow (its steps through goldenStep, its deciders calling env.decided),
// add a goldenCase with its script, and record it with
// go test . -run Golden -update-histories (testdata/histories/README.md).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// goldenCase is one history file: the flow it replays under, the script a
// recording runs, and — for a bad history — what today's code must do.
type goldenCase struct {
	name        string
	description string
	// flow is today's code of the flow.
	flow func(*flowEnv) *loom.Flow
	// recordedWith is, for a bad history, the older version of the flow the
	// log was recorded under: the history replays byte for byte under it,
	// and check asserts what today's flow makes of it.
	recordedWith func(*flowEnv) *loom.Flow
	config       func(*loom.Config)
	// rerunsUnderReplay says the flow re-runs, when replayed, work that a
	// sticky park answered in place does not (an untyped failure before a
	// gate): its log depends on sticky parks, so logNeutral leaves them off.
	rerunsUnderReplay bool
	script            []action
	// check, for a bad history, asserts what today's code does with it; for
	// a good one, any further contract of the case.
	check func(t *testing.T, c goldenCase, h *loadedHistory)
}

// recorder is the flow version the history was recorded under.
func (c goldenCase) recorder() func(*flowEnv) *loom.Flow {
	if c.recordedWith != nil {
		return c.recordedWith
	}
	return c.flow
}

func TestGoldenHistories(t *testing.T) {
	cases := goldenCases()
	var names []string
	for _, c := range cases {
		names = append(names, c.name)
		t.Run(c.name, func(t *testing.T) {
			if *updateHistories {
				log := recordScript(t, c.recorder(), c.config, c.name, c.script)
				writeHistory(t, c.name, c.recorder()(newFlowEnv()).ID, c.description, log)
			}
			h := loadHistory(t, c.name)
			if flowID := c.recorder()(newFlowEnv()).ID; h.file.Flow != flowID || h.file.Description != c.description {
				t.Fatalf("%s holds flow %q, %q; the case says %q, %q: regenerate it if the change is intended",
					c.name, h.file.Flow, h.file.Description, flowID, c.description)
			}
			if err := sameActions(h.actions, c.script); err != nil {
				t.Fatalf("%v: the case's script changed since %s was recorded; regenerate it if the change is intended", err, c.name)
			}
			checkReplay(t, h, c.recorder(), c.config, logNeutral(c.config, !c.rerunsUnderReplay))
			if c.check != nil {
				c.check(t, c, h)
			}
		})
	}
	claimHistories(t, names, "incident-", true)
}

func goldenCases() []goldenCase {
	card := func(number string) map[string]string { return map[string]string{"card": number} }
	return []goldenCase{
		{name: "two-step-gate", flow: twoStepGateFlow,
			description: "step, gate with a resume schema, step: the answer is recorded as parsed and the first step is served on resume",
			script:      []action{startWith(goldenOrder{Item: "widget", Qty: 3}), answer("approve", map[string]any{"by": "ann", "note": "ok"})}},
		{name: "gates-in-sequence", flow: gatesFlow,
			description: "three answers to two gates (sign twice, served by position) with an emit in every segment: each emit is recorded once per execution, not once per re-run",
			script: []action{startWith("contract-12"), answer("review", map[string]bool{"ok": true}),
				answer("sign", map[string]string{"by": "ann"}), answer("sign", map[string]string{"by": "bob"})}},
		{name: "untyped-failure-rerun", flow: untypedFailureFlow, rerunsUnderReplay: true, check: stickyAnswersInPlace,
			description: "an untyped failure is no outcome replay serves: every re-run runs the step again as a new attempt, and the emit after it (unstamped, ADR 0102) is appended again",
			script:      []action{startWith("job-3"), answer("retry", nil)}},
		{name: "parallel-block", flow: parallelFlow, config: func(c *loom.Config) { c.Features.Scopes = true },
			description: "a Parallel block of three branch steps (PARALLEL_COMPLETED under Features.Scopes), then a gate: the resume serves the block from the log",
			script:      []action{startWith(goldenOrder{Item: "gadget", Qty: 2}), answer("approve", true)}},
		{name: "decisions", flow: decisionsFlow,
			description: "loom.Now, ctx.Decide and NegotiateBudget before a gate, Now and Decide after it: replay returns the recorded choices and instants",
			script:      []action{startWith(map[string]int{"amount": 250}), answer("review", map[string]string{"verdict": "accept"})}},
		{name: "timers", flow: timersFlow,
			description: "Sleep, then a gate with a timeout, both answered by TIMER_FIRED at their recorded wakeAt through FireDueTimers",
			script:      []action{startWith("ticket-7"), fireTimer(), fireTimer()}},
		{name: "typed-failure-recovered", flow: typedFailureFlow,
			description: "a step fails on a declared channel and the flow handles it; on resume the typed failure is served from the log and a deliberate Retry(1) succeeds",
			script:      []action{startWith(card("4000-0002")), answer("new-card", card("4242-4242"))}},
		{name: "typed-failure-propagated", flow: typedFailureFlow,
			description: "the retry fails on the channel too and the flow returns it: EXECUTION_FAILED carries the channel",
			script:      []action{startWith(card("4000-0002")), answer("new-card", card("4000-0002"))}},
		{name: "in-doubt-resolved", flow: inDoubtFlow,
			description: "the process dies while a non-idempotent step runs; recovery parks it in doubt (EFFECT_INDOUBT) instead of charging twice, and an operator's verdict completes it",
			script:      []action{startWith(40).crashing("charge"), recoverRun(), verdictDone("charge", 1, "ch_40")}},
		{name: "in-doubt-rerun", flow: inDoubtFlow,
			description: "the same crash, and the operator's verdict is that the charge did not happen: it runs again as attempt 2, under a new idempotency key",
			script:      []action{startWith(40).crashing("charge"), recoverRun(), verdictRerun("charge", 1)}},
		{name: "line-items", flow: lineItemsFlow,
			description: "a loop runs one step per item under Iter ids, then a gate: every iteration is served by its own id",
			script:      []action{startWith([]int{3, 5, 8}), answer("confirm", nil)}},
		{name: "bad-renamed-step", flow: renamedStep, recordedWith: renamedStepOld, check: refuseDiverged("reserve-stock", "reserve"),
			description: "recorded when the first step was called reserve; today's code calls it reserve-stock: the resume parks on __loom_diverged__ and runs nothing",
			script:      []action{startWith(goldenOrder{Item: "bolt", Qty: 9}), answer("confirm", nil)}},
		{name: "bad-reordered-step", flow: reorderedStep, recordedWith: reorderedStepOld, check: refuseDiverged("price", "validate"),
			description: "recorded as validate then price; today's code prices first: the resume parks on __loom_diverged__ and runs nothing",
			script:      []action{startWith(goldenOrder{Item: "nut", Qty: 4}), answer("confirm", nil)}},
		{name: "bad-changed-fingerprint", flow: fingerprintFlow("v2"), recordedWith: fingerprintFlow("v1"), check: refuseFingerprint,
			description: "recorded under code fingerprint v1; today's flow is v2: Resume is refused with FlowCodeMismatchError, and WithCompatibleFingerprints(v1) replays it",
			script:      []action{startWith(goldenOrder{Item: "gear", Qty: 1}), answer("confirm", nil)}},
		{name: "bad-reused-id", flow: reusedIDFlow, check: refuseReusedID,
			description: "a loop calls one step id with different inputs: the second call fails with StepReusedError (use Iter), nothing is appended for it, and the flow fails",
			script:      []action{startWith([]int{3, 5, 8}), answer("confirm", nil)}},
	}
}

// Script constructors: what a recording does, in order.
func startWith(input any) action { return action{kind: actStart, input: mustJSON(input)} }
func answer(gate string, payload any) action {
	return action{kind: actResume, eventType: gate, payload: mustJSON(payload)}
}
func fireTimer() action  { return action{kind: actTimer} }
func recoverRun() action { return action{kind: actRecover} }
func (a action) crashing(step string) action {
	a.crash = step
	return a
}
func verdictDone(step string, attempt int64, output any) action {
	return action{kind: actVerdict, verdict: loom.Verdict{StepID: step, Attempt: attempt, Done: true, Output: mustJSON(output)}}
}
func verdictRerun(step string, attempt int64) action {
	return action{kind: actVerdict, verdict: loom.Verdict{StepID: step, Attempt: attempt}}
}

// flowEnv is what a golden flow reports to, and how the scenario reaches
// into it: it counts every effect invocation (by the attempt's step id) and
// every decider call, keeps the errors a flow saw, and kills the process
// when the scenario says the process died during a step.
type flowEnv struct {
	mu        sync.Mutex
	effects   map[string]int
	decisions map[string]int
	observed  []error
	crashStep string
	crashed   chan struct{}
}

func newFlowEnv() *flowEnv {
	return &flowEnv{effects: map[string]int{}, decisions: map[string]int{}}
}

// effect counts one invocation of the running attempt's effect. When the
// scenario kills the process during this step, it signals and blocks until
// the runtime is closed under it, so its outcome is never recorded.
func (e *flowEnv) effect(ctx context.Context) error {
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

func (e *flowEnv) decided(id string) {
	e.mu.Lock()
	e.decisions[id]++
	e.mu.Unlock()
}

func (e *flowEnv) observe(err error) {
	e.mu.Lock()
	e.observed = append(e.observed, err)
	e.mu.Unlock()
}

func (e *flowEnv) armCrash(step string) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.crashStep, e.crashed = step, make(chan struct{})
	return e.crashed
}

// checkEffects asserts that every effect ran exactly once per attempt the
// log records from sequence from on (STEP_STARTED, STEP_RETRYING) and every
// decider once per DECISION_RECORDED: what the log holds from before was
// served, not run again.
func checkEffects(t *testing.T, mode string, log []event.Envelope, from int64, env *flowEnv) {
	t.Helper()
	attempts, decisions := map[string]int{}, map[string]int{}
	for _, e := range log[from:] {
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
	env.mu.Lock()
	defer env.mu.Unlock()
	if !mapsEqual(attempts, env.effects) {
		t.Errorf("%s: effects ran %v, the log records attempts %v", mode, sortedCounts(env.effects), sortedCounts(attempts))
	}
	if !mapsEqual(decisions, env.decisions) {
		t.Errorf("%s: deciders ran %v, the log records decisions %v", mode, sortedCounts(env.decisions), sortedCounts(decisions))
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a { //loom:order-independent a comparison
		if b[k] != v {
			return false
		}
	}
	return true
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m { //loom:sorted below
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "×" + strconv.Itoa(m[k])
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// goldenStep defines a step whose effect reports to env before fn runs.
func goldenStep[In, Out any](env *flowEnv, id string, fn func(In) (Out, error), opts ...loom.StepOption) *loom.Step[In, Out] {
	return loom.NewStep(id, func(ctx context.Context, in In) (Out, error) {
		if err := env.effect(ctx); err != nil {
			var zero Out
			return zero, err
		}
		return fn(in)
	}, opts...)
}

type goldenOrder struct {
	Item string `json:"item"`
	Qty  int    `json:"qty"`
}

type goldenReceipt struct {
	Order goldenOrder `json:"order"`
	Hold  string      `json:"hold"`
	By    string      `json:"by,omitempty"`
}

func hold(o goldenOrder) (string, error) { return fmt.Sprintf("hold-%s-%d", o.Item, o.Qty), nil }

func twoStepGateFlow(env *flowEnv) *loom.Flow {
	reserve := goldenStep(env, "reserve", hold)
	ship := goldenStep(env, "ship", func(r goldenReceipt) (string, error) { return "shipped " + r.Hold + " for " + r.By, nil })
	return loom.NewFlow("golden.two-step-gate", func(ctx *loom.Context, o goldenOrder) (string, error) {
		h, err := loom.Run(ctx, reserve, o)
		if err != nil {
			return "", err
		}
		a, err := loom.Suspend[struct {
			By string `json:"by"`
		}](ctx, "approve")
		if err != nil {
			return "", err
		}
		return loom.Run(ctx, ship, goldenReceipt{Order: o, Hold: h, By: a.By})
	}, loom.WithResumeSchema("approve", `{"type":"object","properties":{"by":{"type":"string"},"note":{"type":"string"}},"required":["by"]}`))
}

func gatesFlow(env *flowEnv) *loom.Flow {
	draft := goldenStep(env, "draft", func(doc string) (string, error) { return doc + "/draft-1", nil })
	publish := goldenStep(env, "publish", func(by []string) (string, error) { return "published, signed by " + strings.Join(by, " and "), nil })
	return loom.NewFlow("golden.gates", func(ctx *loom.Context, doc string) (string, error) {
		d, err := loom.Run(ctx, draft, doc)
		if err != nil {
			return "", err
		}
		if err := ctx.Emit("doc.drafted", map[string]string{"draft": d}); err != nil {
			return "", err
		}
		review, err := loom.Suspend[struct {
			OK bool `json:"ok"`
		}](ctx, "review")
		if err != nil {
			return "", err
		}
		if err := ctx.Emit("doc.reviewed", map[string]bool{"ok": review.OK}); err != nil {
			return "", err
		}
		var signers []string
		for range 2 {
			s, err := loom.Suspend[struct {
				By string `json:"by"`
			}](ctx, "sign")
			if err != nil {
				return "", err
			}
			signers = append(signers, s.By)
			if err := ctx.Emit("doc.signed", map[string]string{"by": s.By}); err != nil {
				return "", err
			}
		}
		return loom.Run(ctx, publish, signers)
	})
}

func untypedFailureFlow(env *flowEnv) *loom.Flow {
	flaky := goldenStep(env, "flaky", func(job string) (string, error) { return "", errors.New(job + ": upstream timed out") })
	return loom.NewFlow("golden.untyped-failure", func(ctx *loom.Context, job string) (string, error) {
		_, failed := loom.Run(ctx, flaky, job)
		if failed == nil {
			return "", errors.New("flaky succeeded")
		}
		if err := ctx.Emit("job.failed", map[string]string{"error": failed.Error()}); err != nil {
			return "", err
		}
		if _, err := ctx.Suspend("retry"); err != nil {
			return "", err
		}
		return "gave up on " + job, nil
	})
}

// stickyAnswersInPlace pins what untyped-failure-rerun's log depends on:
// with sticky parks on, the answer reaches the run parked in memory, so the
// failed step is not run again and the emit after it not repeated — the
// same inputs write another log than a process that replays.
func stickyAnswersInPlace(t *testing.T, c goldenCase, h *loadedHistory) {
	sticky := func(cfg *loom.Config) { cfg.StickyParks = 0 }
	log, env := replayFrom(t, h, c.flow, sticky, -1)
	n := int(h.actions[1].seq) + 1 // the recorded log through the answer
	if msg, _ := diffLogs(h.raw[:n], log[:min(n, len(log))]); msg != "" {
		t.Fatalf("under sticky parks: %s", msg)
	}
	if got, want := typesOf(log[n:]), []string{event.ExecutionCompleted}; !slices.Equal(got, want) {
		t.Fatalf("under sticky parks the answered run went on with %v, want %v", got, want)
	}
	checkEffects(t, "under sticky parks", log, 0, env)
}

func parallelFlow(env *flowEnv) *loom.Flow {
	fetch := goldenStep(env, "fetch", func(o goldenOrder) (goldenOrder, error) { return o, nil })
	price := goldenStep(env, "price", func(o goldenOrder) (int, error) { return 7 * o.Qty, nil })
	stock := goldenStep(env, "stock", func(o goldenOrder) (bool, error) { return o.Qty < 10, nil })
	fraud := goldenStep(env, "fraud", func(o goldenOrder) (string, error) { return "low", nil })
	commit := goldenStep(env, "commit", func(facts []string) (string, error) { return strings.Join(facts, ","), nil })
	return loom.NewFlow("golden.parallel", func(ctx *loom.Context, in goldenOrder) (string, error) {
		o, err := loom.Run(ctx, fetch, in)
		if err != nil {
			return "", err
		}
		facts, err := loom.Parallel(ctx,
			func(c *loom.Context) (string, error) { p, err := loom.Run(c, price, o); return fmt.Sprint(p), err },
			func(c *loom.Context) (string, error) { s, err := loom.Run(c, stock, o); return fmt.Sprint(s), err },
			func(c *loom.Context) (string, error) { return loom.Run(c, fraud, o) },
		)
		if err != nil {
			return "", err
		}
		if _, err := ctx.Suspend("approve"); err != nil {
			return "", err
		}
		return loom.Run(ctx, commit, facts)
	})
}

func decisionsFlow(env *flowEnv) *loom.Flow {
	type out struct {
		At       int64   `json:"at"`
		Later    int64   `json:"later"`
		Tier     string  `json:"tier"`
		Route    string  `json:"route"`
		Tokens   float64 `json:"tokens"`
		Verdict  string  `json:"verdict"`
		WaitedMs int64   `json:"waitedMs"`
	}
	return loom.NewFlow("golden.decisions", func(ctx *loom.Context, in struct {
		Amount int `json:"amount"`
	}) (out, error) {
		at := loom.Now(ctx)
		tier, err := loom.Decide(ctx, "tier", func() (string, error) {
			env.decided("tier")
			if in.Amount > 100 {
				return "gold", nil
			}
			return "standard", nil
		})
		if err != nil {
			return out{}, err
		}
		tokens, err := ctx.NegotiateBudget(loom.BudgetRequest{Dimension: "tokens", Request: 5000, Max: 2000})
		if err != nil {
			return out{}, err
		}
		answer, err := loom.Suspend[struct {
			Verdict string `json:"verdict"`
		}](ctx, "review")
		if err != nil {
			return out{}, err
		}
		later := loom.Now(ctx) // the resume's instant; at stays the recorded one
		route, err := loom.Decide(ctx, "route", func() (string, error) {
			env.decided("route")
			return tier + "/" + answer.Verdict, nil
		})
		if err != nil {
			return out{}, err
		}
		return out{At: at.UnixMilli(), Later: later.UnixMilli(), Tier: tier, Route: route, Tokens: tokens,
			Verdict: answer.Verdict, WaitedMs: later.Sub(at).Milliseconds()}, nil
	})
}

func timersFlow(env *flowEnv) *loom.Flow {
	remind := goldenStep(env, "remind", func(ticket string) (string, error) { return "reminded " + ticket, nil })
	closeTicket := goldenStep(env, "close", func(why string) (string, error) { return "closed: " + why, nil })
	return loom.NewFlow("golden.timers", func(ctx *loom.Context, ticket string) (string, error) {
		if err := ctx.Sleep(10 * time.Minute); err != nil {
			return "", err
		}
		if _, err := loom.Run(ctx, remind, ticket); err != nil {
			return "", err
		}
		reply, err := loom.Suspend[struct {
			Text   string `json:"text"`
			WakeAt int64  `json:"wakeAt"`
		}](ctx, "reply", loom.Timeout(time.Hour))
		if err != nil {
			return "", err
		}
		why := "replied " + reply.Text
		if reply.WakeAt != 0 {
			why = fmt.Sprintf("no reply by %d", reply.WakeAt)
		}
		return loom.Run(ctx, closeTicket, why)
	})
}

const declinedSchema = `{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`

func typedFailureFlow(env *flowEnv) *loom.Flow {
	type card struct {
		Card string `json:"card"`
	}
	charge := goldenStep(env, "charge", func(c card) (string, error) {
		if strings.HasPrefix(c.Card, "4000") {
			return "", loom.Fail("declined", map[string]string{"code": "insufficient_funds"})
		}
		return "ch_" + c.Card[len(c.Card)-4:], nil
	}, loom.ErrorChannel("declined", declinedSchema))
	notify := goldenStep(env, "notify-declined", func(p json.RawMessage) (string, error) { return "told the customer: " + string(p), nil })
	return loom.NewFlow("golden.typed-failure", func(ctx *loom.Context, in card) (string, error) {
		id, err := loom.Run(ctx, charge, in)
		var tf *loom.TypedFailure
		if !errors.As(err, &tf) {
			return id, err
		}
		if _, err := loom.Run(ctx, notify, tf.Payload); err != nil {
			return "", err
		}
		next, err := loom.Suspend[card](ctx, "new-card")
		if err != nil {
			return "", err
		}
		return loom.Run(ctx, charge.Retry(1), next)
	})
}

func inDoubtFlow(env *flowEnv) *loom.Flow {
	reserve := goldenStep(env, "reserve", func(amount int) (string, error) { return fmt.Sprintf("r_%d", amount), nil })
	// The charge's id carries its idempotency key: a rerun is a new attempt.
	charge := loom.NewStep("charge", func(ctx context.Context, amount int) (string, error) {
		if err := env.effect(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("ch_%d@%s", amount, loom.IdempotencyKey(ctx)), nil
	}, loom.NonIdempotent())
	receipt := goldenStep(env, "receipt", func(id string) (string, error) { return "receipt for " + id, nil })
	return loom.NewFlow("golden.in-doubt", func(ctx *loom.Context, amount int) (string, error) {
		if _, err := loom.Run(ctx, reserve, amount); err != nil {
			return "", err
		}
		id, err := loom.Run(ctx, charge, amount)
		if err != nil {
			return "", err
		}
		return loom.Run(ctx, receipt, id)
	})
}

func lineItemsFlow(env *flowEnv) *loom.Flow {
	charge := goldenStep(env, "charge", func(amount int) (string, error) { return fmt.Sprintf("ch_%d", amount), nil })
	return loom.NewFlow("golden.line-items", func(ctx *loom.Context, items []int) ([]string, error) {
		var ids []string
		for i, amount := range items {
			id, err := loom.Run(ctx, charge.Iter(i), amount)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		if _, err := ctx.Suspend("confirm"); err != nil {
			return nil, err
		}
		return ids, nil
	})
}

// reusedIDFlow is line-items written without Iter, the gate first: the
// loop reaches the kernel's reuse check only once the answer arrives.
func reusedIDFlow(env *flowEnv) *loom.Flow {
	charge := goldenStep(env, "charge", func(amount int) (string, error) { return fmt.Sprintf("ch_%d", amount), nil })
	return loom.NewFlow("golden.reused-id", func(ctx *loom.Context, items []int) ([]string, error) {
		if _, err := ctx.Suspend("confirm"); err != nil {
			return nil, err
		}
		var ids []string
		for _, amount := range items {
			id, err := loom.Run(ctx, charge, amount)
			var reused *loom.StepReusedError
			if errors.As(err, &reused) {
				env.observe(err)
			}
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		return ids, nil
	})
}

// orderFlow is step, step, gate, step — the shape of every bad history's
// flow; ids names its steps in the order the code issues them.
func orderFlow(flowID string, ids [3]string, opts ...loom.FlowOption) func(*flowEnv) *loom.Flow {
	return func(env *flowEnv) *loom.Flow {
		var steps [3]*loom.Step[goldenOrder, string]
		for i, id := range ids {
			steps[i] = goldenStep(env, id, func(o goldenOrder) (string, error) { return id + ":" + o.Item, nil })
		}
		return loom.NewFlow(flowID, func(ctx *loom.Context, o goldenOrder) ([]string, error) {
			var out []string
			for i, s := range steps {
				if i == 2 {
					if _, err := ctx.Suspend("confirm"); err != nil {
						return nil, err
					}
				}
				r, err := loom.Run(ctx, s, o)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, nil
		}, opts...)
	}
}

var (
	renamedStepOld   = orderFlow("golden.renamed", [3]string{"reserve", "price", "ship"})
	renamedStep      = orderFlow("golden.renamed", [3]string{"reserve-stock", "price", "ship"})
	reorderedStepOld = orderFlow("golden.reordered", [3]string{"validate", "price", "ship"})
	reorderedStep    = orderFlow("golden.reordered", [3]string{"price", "validate", "ship"})
)

func fingerprintFlow(fp string, compatible ...string) func(*flowEnv) *loom.Flow {
	return orderFlow("golden.fingerprint", [3]string{"reserve", "price", "ship"},
		loom.WithCodeFingerprint(fp), loom.WithCompatibleFingerprints(compatible...))
}

// fromFirstPark hands today's flow the recorded log up to its first park
// and performs the recorded answer. It returns the world, still open, the
// prefix length and the answer's error.
func fromFirstPark(t *testing.T, h *loadedHistory, flow func(*flowEnv) *loom.Flow) (*goldenWorld, int, error) {
	t.Helper()
	if len(h.actions) < 2 || h.actions[1].kind != actResume {
		t.Fatalf("%s: a bad history parks once and is answered", h.file.Name)
	}
	n := int(h.actions[1].seq)
	w := newWorld(t, flow, nil, h.id, h.envs[:n])
	_, err := w.perform(h.actions[1], true)
	return w, n, err
}

// refuseDiverged: today's code issues a step where the log has another, so
// the answered resume parks on the reserved divergence gate before the
// step runs, its reason naming both ids; the answer is recorded as it was
// and nothing else is appended.
func refuseDiverged(issued, logged string) func(*testing.T, goldenCase, *loadedHistory) {
	return func(t *testing.T, c goldenCase, h *loadedHistory) {
		w, n, err := fromFirstPark(t, h, c.flow)
		if err != nil {
			t.Fatalf("the answer was refused: %v", err)
		}
		w.finish()
		log := w.log()
		if len(log) != n+2 {
			t.Fatalf("today's code appended %d events, want the answer and the park:\n%s", len(log)-n, dumpFrom(log, n))
		}
		if msg, _ := diffLogs(h.raw[:n+1], log[:n+1]); msg != "" {
			t.Fatalf("the answer was not recorded as it was: %s", msg)
		}
		st := fold.Fold(log)
		park := st.Variables.SuspendedOn
		if log[n+1].Type != event.ExecutionSuspended || park == nil || park.On != fold.GateDiverged {
			t.Fatalf("today's code did not park on %s: %s", fold.GateDiverged, dumpFrom(log, n+1))
		}
		var p struct {
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(log[n+1].Payload, &p); err != nil || !strings.Contains(p.Reason, `"`+issued+`"`) || !strings.Contains(p.Reason, `"`+logged+`"`) {
			t.Fatalf("the divergence reason %q does not name %q and %q", p.Reason, issued, logged)
		}
		if len(w.env.effects) != 0 {
			t.Fatalf("effects ran at a divergence: %s", sortedCounts(w.env.effects))
		}
		// The operator's way out: put the recorded code back and answer the
		// reserved gate with null. The steps the log holds are served; only
		// the step after the gate runs.
		fixed := newWorld(t, c.recordedWith, nil, h.id, log)
		defer fixed.close()
		resume := action{kind: actResume, eventType: fold.GateDiverged, at: log[len(log)-1].Timestamp + goldenTick}
		if _, err := fixed.perform(resume, true); err != nil {
			t.Fatalf("resuming %s under the recorded code: %v", fold.GateDiverged, err)
		}
		fixed.finish()
		after := fixed.log()
		want := []string{event.ExecutionResumed, event.StepStarted, event.StepCompleted, event.ExecutionCompleted}
		if got := typesOf(after[len(log):]); !slices.Equal(got, want) || fold.Fold(after).Status != fold.StatusCompleted {
			t.Fatalf("after the operator's resume the log goes on with %v, want %v", got, want)
		}
		if !mapsEqual(fixed.env.effects, map[string]int{"ship": 1}) {
			t.Fatalf("after the operator's resume the effects ran %s, want only ship once", sortedCounts(fixed.env.effects))
		}
	}
}

// refuseFingerprint: the recorded code pin v1 is not today's v2, so Resume
// is refused with *loom.FlowCodeMismatchError naming both and the log is
// unchanged; declared compatible, v2 replays the rest of the v1 log.
func refuseFingerprint(t *testing.T, c goldenCase, h *loadedHistory) {
	w, n, err := fromFirstPark(t, h, c.flow)
	defer w.close()
	var mismatch *loom.FlowCodeMismatchError
	if !errors.As(err, &mismatch) || mismatch.Recorded != "v1" || mismatch.Registered != "v2" {
		t.Fatalf("Resume under v2 returned %v, want *loom.FlowCodeMismatchError v1/v2", err)
	}
	if !strings.Contains(err.Error(), `"v1"`) || !strings.Contains(err.Error(), `"v2"`) {
		t.Fatalf("the refusal %q does not name both fingerprints", err)
	}
	if log := w.log(); len(log) != n || len(w.env.effects) != 0 {
		t.Fatalf("a refused resume left %d events (want %d) and ran %s", len(log), n, sortedCounts(w.env.effects))
	}
	compatible := fingerprintFlow("v2", "v1")
	log, env := replayFrom(t, h, compatible, nil, 0)
	if msg, _ := diffLogs(h.raw, log); msg != "" {
		t.Fatalf("v2 declared compatible with v1 did not replay the v1 log: %s", msg)
	}
	checkEffects(t, "v2 compatible with v1", h.envs, int64(n), env)
}

// refuseReusedID: the second call of "charge" with another input fails with
// *loom.StepReusedError pointing at Iter; nothing is appended for it, and
// the flow's failure is recorded.
func refuseReusedID(t *testing.T, c goldenCase, h *loadedHistory) {
	w, n, err := fromFirstPark(t, h, c.flow)
	if err != nil {
		t.Fatal(err)
	}
	w.finish()
	log := w.log()
	if msg, _ := diffLogs(h.raw, log); msg != "" {
		t.Fatal(msg)
	}
	var reused *loom.StepReusedError
	if len(w.env.observed) != 1 || !errors.As(w.env.observed[0], &reused) || reused.ID != "charge" || reused.Kind != "step" ||
		!strings.Contains(reused.Error(), "Iter") {
		t.Fatalf("the flow saw %v, want one *loom.StepReusedError for charge that says Iter", w.env.observed)
	}
	want := []string{event.ExecutionResumed, event.StepStarted, event.StepCompleted, event.ExecutionFailed}
	if got := typesOf(log[n:]); !slices.Equal(got, want) {
		t.Fatalf("after the answer today's code appended %v, want %v", got, want)
	}
	var failed struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(log[len(log)-1].Payload, &failed); err != nil || !strings.Contains(failed.Error.Message, "Iter") {
		t.Fatalf("EXECUTION_FAILED says %q, want the reuse error naming Iter", failed.Error.Message)
	}
	if w.env.effects["charge"] != 1 {
		t.Fatalf("charge ran %d times, want once: the reused call must not run", w.env.effects["charge"])
	}
}

func typesOf(log []event.Envelope) []string {
	out := make([]string, len(log))
	for i, e := range log {
		out[i] = e.Type
	}
	return out
}

func dumpFrom(log []event.Envelope, from int) string {
	var b strings.Builder
	for _, e := range log[from:] {
		c, _ := canonicalEnvelope(e)
		b.Write(c)
		b.WriteByte('\n')
	}
	return b.String()
}
