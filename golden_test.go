package loom_test

// Golden histories (STYLE rule 12). testdata/histories holds recorded logs of
// flows, one file each (format in testdata/histories/README.md). A good
// history must replay byte for byte under today's code: a fresh runtime
// drives the scenario its log records and must write the same log, and a
// fresh process handed the recorded prefix at every park (or crash point)
// must write the same rest. A bad history (bad-*.json) is a log recorded
// under an older version of its flow: today's code must park it or refuse
// it with the typed error its case names, appending nothing else.
//
// The harness is internal/goldentest, shared with the example app's
// histories (examples/incident/golden_test.go); this file holds the
// kernel's cases, golden_flows_test.go their flows and the checks of the
// bad histories. Adding one: write the flow (its steps through goldenStep,
// its deciders calling env.Decided), add a goldenCase with its script, and
// record it with go test . -run Golden -update-histories.

import (
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/internal/goldentest"
)

const historyDir = "testdata/histories"

// goldenCase is one history file: the flow it replays under, the script a
// recording runs, and — for a bad history — what today's code must do.
type goldenCase struct {
	name        string
	description string
	// flow is today's code of the flow.
	flow goldentest.FlowFunc
	// recordedWith is, for a bad history, the older version of the flow the
	// log was recorded under: the history replays byte for byte under it,
	// and check asserts what today's flow makes of it.
	recordedWith goldentest.FlowFunc
	config       func(*loom.Config)
	// rerunsUnderReplay says the flow re-runs, when replayed, work that a
	// sticky park answered in place does not (an untyped failure before a
	// gate): its log depends on sticky parks, so the log-neutral options
	// leave them off.
	rerunsUnderReplay bool
	script            []goldentest.Action
	// check, for a bad history, asserts what today's code does with it; for
	// a good one, any further contract of the case.
	check func(t *testing.T, c goldenCase, h *goldentest.History)
}

// recorder is the flow version the history was recorded under.
func (c goldenCase) recorder() goldentest.FlowFunc {
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
			flowID := c.recorder()(goldentest.NewEnv()).ID
			if goldentest.Updating() {
				log := goldentest.Record(t, c.recorder(), c.config, c.name, c.script)
				goldentest.Write(t, historyDir, c.name, flowID, c.description, log)
			}
			h := goldentest.Load(t, historyDir, c.name)
			if h.File.Flow != flowID || h.File.Description != c.description {
				t.Fatalf("%s holds flow %q, %q; the case says %q, %q: regenerate it if the change is intended",
					c.name, h.File.Flow, h.File.Description, flowID, c.description)
			}
			if err := goldentest.SameActions(h.Actions, c.script); err != nil {
				t.Fatalf("%v: the case's script changed since %s was recorded; regenerate it if the change is intended", err, c.name)
			}
			neutral := goldentest.LogNeutral(c.config, !c.rerunsUnderReplay)
			goldentest.CheckReplay(t, h, c.recorder(), c.config, neutral, goldentest.CheckCounts)
			if c.check != nil {
				c.check(t, c, h)
			}
		})
	}
	goldentest.Claim(t, historyDir, names, func(string) bool { return true })
}

func goldenCases() []goldenCase {
	card := func(number string) map[string]string { return map[string]string{"card": number} }
	start, answer := goldentest.StartWith, goldentest.Answer
	return []goldenCase{
		{name: "two-step-gate", flow: twoStepGateFlow,
			description: "step, gate with a resume schema, step: the answer is recorded as parsed and the first step is served on resume",
			script:      []goldentest.Action{start(goldenOrder{Item: "widget", Qty: 3}), answer("approve", map[string]any{"by": "ann", "note": "ok"})}},
		{name: "gates-in-sequence", flow: gatesFlow,
			description: "three answers to two gates (sign twice, served by position) with an emit in every segment: each emit is recorded once per execution, not once per re-run",
			script: []goldentest.Action{start("contract-12"), answer("review", map[string]bool{"ok": true}),
				answer("sign", map[string]string{"by": "ann"}), answer("sign", map[string]string{"by": "bob"})}},
		{name: "untyped-failure-rerun", flow: untypedFailureFlow, rerunsUnderReplay: true, check: stickyAnswersInPlace,
			description: "an untyped failure is no outcome replay serves: every re-run runs the step again as a new attempt, and the emit after it (unstamped, ADR 0102) is appended again",
			script:      []goldentest.Action{start("job-3"), answer("retry", nil)}},
		{name: "parallel-block", flow: parallelFlow, config: func(c *loom.Config) { c.Features.Scopes = true },
			description: "a Parallel block of three branch steps (PARALLEL_COMPLETED under Features.Scopes), then a gate: the resume serves the block from the log",
			script:      []goldentest.Action{start(goldenOrder{Item: "gadget", Qty: 2}), answer("approve", true)}},
		{name: "decisions", flow: decisionsFlow,
			description: "loom.Now, ctx.Decide and NegotiateBudget before a gate, Now and Decide after it: replay returns the recorded choices and instants",
			script:      []goldentest.Action{start(map[string]int{"amount": 250}), answer("review", map[string]string{"verdict": "accept"})}},
		{name: "timers", flow: timersFlow,
			description: "Sleep, then a gate with a timeout, both answered by TIMER_FIRED at their recorded wakeAt through FireDueTimers",
			script:      []goldentest.Action{start("ticket-7"), goldentest.FireTimer(), goldentest.FireTimer()}},
		{name: "typed-failure-recovered", flow: typedFailureFlow,
			description: "a step fails on a declared channel and the flow handles it; on resume the typed failure is served from the log and a deliberate Retry(1) succeeds",
			script:      []goldentest.Action{start(card("4000-0002")), answer("new-card", card("4242-4242"))}},
		{name: "typed-failure-propagated", flow: typedFailureFlow,
			description: "the retry fails on the channel too and the flow returns it: EXECUTION_FAILED carries the channel",
			script:      []goldentest.Action{start(card("4000-0002")), answer("new-card", card("4000-0002"))}},
		{name: "in-doubt-resolved", flow: inDoubtFlow,
			description: "the process dies while a non-idempotent step runs; recovery parks it in doubt (EFFECT_INDOUBT) instead of charging twice, and an operator's verdict completes it",
			script:      []goldentest.Action{start(40).Crashing("charge"), goldentest.RecoverRun(), goldentest.VerdictDone("charge", 1, "ch_40")}},
		{name: "in-doubt-rerun", flow: inDoubtFlow,
			description: "the same crash, and the operator's verdict is that the charge did not happen: it runs again as attempt 2, under a new idempotency key",
			script:      []goldentest.Action{start(40).Crashing("charge"), goldentest.RecoverRun(), goldentest.VerdictRerun("charge", 1)}},
		{name: "moved-onto-another-flow", flow: movedFlows,
			description: "ResumeAs onto another flow at a gate, then a resume in a process with no snapshot of the move: the flow the latest event names (v2) runs, not the start's",
			script: []goldentest.Action{start("memo-4"), goldentest.AnswerOnto("golden.moved.v2", "review", map[string]bool{"ok": true}),
				answer("sign", map[string]string{"by": "ann"})}},
		{name: "line-items", flow: lineItemsFlow,
			description: "a loop runs one step per item under Iter ids, then a gate: every iteration is served by its own id",
			script:      []goldentest.Action{start([]int{3, 5, 8}), answer("confirm", nil)}},
		{name: "bad-renamed-step", flow: renamedStep, recordedWith: renamedStepOld, check: refuseDiverged("reserve-stock", "reserve"),
			description: "recorded when the first step was called reserve; today's code calls it reserve-stock: the resume parks on __loom_diverged__ and runs nothing",
			script:      []goldentest.Action{start(goldenOrder{Item: "bolt", Qty: 9}), answer("confirm", nil)}},
		{name: "bad-reordered-step", flow: reorderedStep, recordedWith: reorderedStepOld, check: refuseDiverged("price", "validate"),
			description: "recorded as validate then price; today's code prices first: the resume parks on __loom_diverged__ and runs nothing",
			script:      []goldentest.Action{start(goldenOrder{Item: "nut", Qty: 4}), answer("confirm", nil)}},
		{name: "bad-changed-fingerprint", flow: fingerprintFlow("v2"), recordedWith: fingerprintFlow("v1"), check: refuseFingerprint,
			description: "recorded under code fingerprint v1; today's flow is v2: Resume is refused with FlowCodeMismatchError, and WithCompatibleFingerprints(v1) replays it",
			script:      []goldentest.Action{start(goldenOrder{Item: "gear", Qty: 1}), answer("confirm", nil)}},
		{name: "bad-reused-id", flow: reusedIDFlow, check: refuseReusedID,
			description: "a loop calls one step id with different inputs: the second call fails with StepReusedError (use Iter), nothing is appended for it, and the flow fails",
			script:      []goldentest.Action{start([]int{3, 5, 8}), answer("confirm", nil)}},
	}
}
