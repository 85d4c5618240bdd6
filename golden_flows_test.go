package loom_test

// The kernel's golden flows, and for each bad history what today's code
// must do with it (the cases are in golden_test.go, the harness in
// internal/goldentest). A flow's steps report to the world's
// goldentest.Env through goldenStep, its deciders through env.Decided, so
// a replay can tell what it ran from what the log served.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/goldentest"
)

// goldenStep defines a step whose effect reports to env before fn runs.
func goldenStep[In, Out any](env *goldentest.Env, id string, fn func(In) (Out, error), opts ...loom.StepOption) *loom.Step[In, Out] {
	return loom.NewStep(id, func(ctx context.Context, in In) (Out, error) {
		if err := env.Effect(ctx); err != nil {
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

func twoStepGateFlow(env *goldentest.Env) *loom.Flow {
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

func gatesFlow(env *goldentest.Env) *loom.Flow {
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

func untypedFailureFlow(env *goldentest.Env) *loom.Flow {
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
func stickyAnswersInPlace(t *testing.T, c goldenCase, h *goldentest.History) {
	sticky := func(cfg *loom.Config) { cfg.StickyParks = 0 }
	log, env := goldentest.Replay(t, h, c.flow, sticky, -1)
	n := int(h.Actions[1].Seq) + 1 // the recorded log through the answer
	if msg, _ := goldentest.Diff(h.Raw[:n], log[:min(n, len(log))]); msg != "" {
		t.Fatalf("under sticky parks: %s", msg)
	}
	if got, want := typesOf(log[n:]), []string{event.ExecutionCompleted}; !slices.Equal(got, want) {
		t.Fatalf("under sticky parks the answered run went on with %v, want %v", got, want)
	}
	goldentest.CheckCounts(t, "under sticky parks", log, env)
}

func parallelFlow(env *goldentest.Env) *loom.Flow {
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

func decisionsFlow(env *goldentest.Env) *loom.Flow {
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
			env.Decided("tier")
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
			env.Decided("route")
			return tier + "/" + answer.Verdict, nil
		})
		if err != nil {
			return out{}, err
		}
		return out{At: at.UnixMilli(), Later: later.UnixMilli(), Tier: tier, Route: route, Tokens: tokens,
			Verdict: answer.Verdict, WaitedMs: later.Sub(at).Milliseconds()}, nil
	})
}

func timersFlow(env *goldentest.Env) *loom.Flow {
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

func typedFailureFlow(env *goldentest.Env) *loom.Flow {
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

func inDoubtFlow(env *goldentest.Env) *loom.Flow {
	reserve := goldenStep(env, "reserve", func(amount int) (string, error) { return fmt.Sprintf("r_%d", amount), nil })
	// The charge's id carries its idempotency key: a rerun is a new attempt.
	charge := loom.NewStep("charge", func(ctx context.Context, amount int) (string, error) {
		if err := env.Effect(ctx); err != nil {
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

func lineItemsFlow(env *goldentest.Env) *loom.Flow {
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
func reusedIDFlow(env *goldentest.Env) *loom.Flow {
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
				env.Observe(err)
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
func orderFlow(flowID string, ids [3]string, opts ...loom.FlowOption) goldentest.FlowFunc {
	return func(env *goldentest.Env) *loom.Flow {
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

func fingerprintFlow(fp string, compatible ...string) goldentest.FlowFunc {
	return orderFlow("golden.fingerprint", [3]string{"reserve", "price", "ship"},
		loom.WithCodeFingerprint(fp), loom.WithCompatibleFingerprints(compatible...))
}

// fromFirstPark hands today's flow the recorded log up to its first park
// and performs the recorded answer. It returns the world, still open, the
// prefix length and the answer's error.
func fromFirstPark(t *testing.T, h *goldentest.History, flow goldentest.FlowFunc) (*goldentest.World, int, error) {
	t.Helper()
	if len(h.Actions) < 2 || h.Actions[1].Kind != goldentest.ActResume {
		t.Fatalf("%s: a bad history parks once and is answered", h.File.Name)
	}
	n := int(h.Actions[1].Seq)
	w := goldentest.NewWorld(t, flow, nil, h.ID, h.Events[:n])
	_, err := w.Perform(h.Actions[1])
	return w, n, err
}

// refuseDiverged: today's code issues a step where the log has another, so
// the answered resume parks on the reserved divergence gate before the
// step runs, its reason naming both ids; the answer is recorded as it was
// and nothing else is appended.
func refuseDiverged(issued, logged string) func(*testing.T, goldenCase, *goldentest.History) {
	return func(t *testing.T, c goldenCase, h *goldentest.History) {
		w, n, err := fromFirstPark(t, h, c.flow)
		if err != nil {
			t.Fatalf("the answer was refused: %v", err)
		}
		w.Finish()
		log := w.Log()
		if len(log) != n+2 {
			t.Fatalf("today's code appended %d events, want the answer and the park:\n%s", len(log)-n, dumpFrom(log, n))
		}
		if msg, _ := goldentest.Diff(h.Raw[:n+1], log[:n+1]); msg != "" {
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
		if ran := w.Env().Effects(); len(ran) != 0 {
			t.Fatalf("effects ran at a divergence: %s", ran)
		}
		// The operator's way out: put the recorded code back and answer the
		// reserved gate with null. The steps the log holds are served; only
		// the step after the gate runs.
		fixed := goldentest.NewWorld(t, c.recordedWith, nil, h.ID, log)
		defer fixed.Close()
		resume := goldentest.Action{Kind: goldentest.ActResume, EventType: fold.GateDiverged, At: log[len(log)-1].Timestamp + goldentest.Tick}
		if _, err := fixed.Perform(resume); err != nil {
			t.Fatalf("resuming %s under the recorded code: %v", fold.GateDiverged, err)
		}
		fixed.Finish()
		after := fixed.Log()
		want := []string{event.ExecutionResumed, event.StepStarted, event.StepCompleted, event.ExecutionCompleted}
		if got := typesOf(after[len(log):]); !slices.Equal(got, want) || fold.Fold(after).Status != fold.StatusCompleted {
			t.Fatalf("after the operator's resume the log goes on with %v, want %v", got, want)
		}
		if ran := fixed.Env().Effects(); !maps.Equal(ran, goldentest.Counts{"ship": 1}) {
			t.Fatalf("after the operator's resume the effects ran %s, want only ship once", ran)
		}
	}
}

// refuseFingerprint: the recorded code pin v1 is not today's v2, so Resume
// is refused with *loom.FlowCodeMismatchError naming both and the log is
// unchanged; declared compatible, v2 replays the rest of the v1 log.
func refuseFingerprint(t *testing.T, c goldenCase, h *goldentest.History) {
	w, n, err := fromFirstPark(t, h, c.flow)
	var mismatch *loom.FlowCodeMismatchError
	if !errors.As(err, &mismatch) || mismatch.Recorded != "v1" || mismatch.Registered != "v2" {
		t.Fatalf("Resume under v2 returned %v, want *loom.FlowCodeMismatchError v1/v2", err)
	}
	defer w.Close() // the refused process; the test's cleanup closes it on a failure
	if !strings.Contains(err.Error(), `"v1"`) || !strings.Contains(err.Error(), `"v2"`) {
		t.Fatalf("the refusal %q does not name both fingerprints", err)
	}
	if log, ran := w.Log(), w.Env().Effects(); len(log) != n || len(ran) != 0 {
		t.Fatalf("a refused resume left %d events (want %d) and ran %s", len(log), n, ran)
	}
	compatible := fingerprintFlow("v2", "v1")
	log, env := goldentest.Replay(t, h, compatible, nil, 0)
	if msg, _ := goldentest.Diff(h.Raw, log); msg != "" {
		t.Fatalf("v2 declared compatible with v1 did not replay the v1 log: %s", msg)
	}
	goldentest.CheckCounts(t, "v2 compatible with v1", h.Events[n:], env)
}

// refuseReusedID: the second call of "charge" with another input fails with
// *loom.StepReusedError pointing at Iter; nothing is appended for it, and
// the flow's failure is recorded.
func refuseReusedID(t *testing.T, c goldenCase, h *goldentest.History) {
	w, n, err := fromFirstPark(t, h, c.flow)
	if err != nil {
		t.Fatal(err)
	}
	w.Finish()
	log := w.Log()
	if msg, _ := goldentest.Diff(h.Raw, log); msg != "" {
		t.Fatal(msg)
	}
	var reused *loom.StepReusedError
	if seen := w.Env().Observed(); len(seen) != 1 || !errors.As(seen[0], &reused) || reused.ID != "charge" || reused.Kind != "step" ||
		!strings.Contains(reused.Error(), "Iter") {
		t.Fatalf("the flow saw %v, want one *loom.StepReusedError for charge that says Iter", seen)
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
	if ran := w.Env().Effects()["charge"]; ran != 1 {
		t.Fatalf("charge ran %d times, want once: the reused call must not run", ran)
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
		c, _ := goldentest.Canonical(e)
		b.Write(c)
		b.WriteByte('\n')
	}
	return b.String()
}

// movedFlows is an execution moved onto another flow: golden.moved.v1
// drafts and parks on review; an operator answers review with ResumeAs onto
// golden.moved.v2, which drafts (served), parks on review (answered), then
// on sign, and publishes. The resume at sign, in a process with no snapshot
// of the move, must drive v2 — the flow the latest event names, not the
// start's (the bug this history pins).
func movedFlows(env *goldentest.Env) *loom.Flow {
	draft := goldenStep(env, "draft", func(doc string) (string, error) { return doc + "/draft-1", nil })
	publish := goldenStep(env, "publish", func(d string) (string, error) { return "published " + d, nil })
	v2 := loom.NewFlow("golden.moved.v2", func(ctx *loom.Context, doc string) (string, error) {
		d, err := loom.Run(ctx, draft, doc)
		if err != nil {
			return "", err
		}
		if _, err := ctx.Suspend("review"); err != nil {
			return "", err
		}
		if _, err := ctx.Suspend("sign"); err != nil {
			return "", err
		}
		return loom.Run(ctx, publish, d)
	})
	env.Also(v2)
	return loom.NewFlow("golden.moved.v1", func(ctx *loom.Context, doc string) (string, error) {
		d, err := loom.Run(ctx, draft, doc)
		if err != nil {
			return "", err
		}
		if _, err := ctx.Suspend("review"); err != nil {
			return "", err
		}
		return "v1 kept " + d, nil
	})
}
