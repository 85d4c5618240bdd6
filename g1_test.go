package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// G1 (spec §1): every additive capability preserves P2 (replaying a log
// reconstructs its state) and P9 (a non-deterministic choice is recorded
// and served, never computed again). Each case below wires one capability
// the DST does not turn on, and runs its flow twice: answered in place
// (sticky parks: the body runs once) and re-driven from the log at every
// park (the body re-runs and everything before the park is served). Both
// runs must write the same log, event for event, fold to the same state,
// and end with the same output; and a new runtime's CheckReplay of the
// log must find it compatible. Every flow also takes a choice that differs
// each time it is computed (a counter): a replay that computed it again
// would end with another output.

// g1Answer is one answer of a case, in order: the gate it answers and what.
type g1Answer struct {
	gate, payload, credentials string
}

type g1Case struct {
	name    string
	cfg     func(clk *ringClock) loom.Config // the capability wired
	flow    func(choices *atomic.Int64) *loom.Flow
	answers []g1Answer
	// shows are event types the log must hold: the capability did act.
	shows []string
	// seeded: the flow draws from a recorded random seed, so two runs
	// differ in that decision (and what depends on it); the runs are
	// compared event type by event type, and each run checks itself.
	seeded bool
}

// choice is the case flows' non-deterministic choice: the counter, read
// through a decision.
func choice(ctx *loom.Context, choices *atomic.Int64) (int64, error) {
	return loom.Decide(ctx, "choice", func() (int64, error) { return choices.Add(1), nil })
}

func g1Cases() []g1Case {
	flaky := func() func(context.Context) (any, error) {
		var calls atomic.Int64
		return func(context.Context) (any, error) {
			if calls.Add(1) == 1 {
				return nil, errors.New("first attempt fails")
			}
			return "second attempt", nil
		}
	}
	return []g1Case{
		{
			name:  "effect rings, permissive",
			shows: []string{event.ResourceMetered},
			cfg: func(clk *ringClock) loom.Config {
				_, reg := ringFlow(clk)
				return loom.Config{Middleware: permissiveStack(clk), Effects: reg}
			},
			flow: func(choices *atomic.Int64) *loom.Flow {
				return loom.NewFlow("g1", func(ctx *loom.Context, _ int) (string, error) {
					out, err := ctx.Execute(&loom.Task{ID: "fetch", Kind: "tool", ToolID: "http.get"}, map[string]int{"page": 1})
					if err != nil {
						return "", err
					}
					c, err := choice(ctx, choices)
					if err != nil {
						return "", err
					}
					ok, err := loom.Suspend[bool](ctx, "approve")
					return fmt.Sprintf("%s|%d|%v", out, c, ok), err
				})
			},
			answers: []g1Answer{{gate: "approve", payload: "true"}},
		},
		{
			name:  "retries and typed failures",
			shows: []string{event.StepRetrying, event.StepFailed},
			cfg: func(*ringClock) loom.Config {
				return loom.Config{DefaultRetry: &middleware.RetryPolicy{MaxAttempts: 3,
					Backoff: func(int64) time.Duration { return 0 }, Sleep: func(context.Context, time.Duration) error { return nil }}}
			},
			flow: func(choices *atomic.Int64) *loom.Flow {
				again := flaky()
				refuse := loom.NewStep("refuse", func(context.Context, int) (int, error) {
					return 0, &loom.TypedFailure{Channel: "declined", Payload: json.RawMessage(`{"why":"limit"}`)}
				}, loom.ErrorChannel("declined", `{"type":"object"}`))
				return loom.NewFlow("g1", func(ctx *loom.Context, _ int) (string, error) {
					got, err := ctx.Run("flaky", again)
					if err != nil {
						return "", err
					}
					_, err = loom.Run(ctx, refuse, 1)
					var typed *loom.TypedFailure
					if !errors.As(err, &typed) {
						return "", fmt.Errorf("want a typed failure, got %v", err)
					}
					c, err := choice(ctx, choices)
					if err != nil {
						return "", err
					}
					ok, err := loom.Suspend[bool](ctx, "approve")
					return fmt.Sprintf("%s|%s|%d|%v", got, typed.Channel, c, ok), err
				})
			},
			answers: []g1Answer{{gate: "approve", payload: "true"}},
		},
		{
			name:  "human steps",
			shows: []string{event.StepStarted, event.StepCompleted},
			cfg:   func(*ringClock) loom.Config { return loom.Config{} },
			flow: func(choices *atomic.Int64) *loom.Flow {
				return loom.NewFlow("g1", func(ctx *loom.Context, _ int) (string, error) {
					a, err := loom.Ask[refundAnswer](ctx, "approve-refund")
					if err != nil {
						return "", err
					}
					c, err := choice(ctx, choices)
					if err != nil {
						return "", err
					}
					b, err := loom.Ask[refundAnswer](ctx, "second-opinion")
					if err != nil {
						return "", err
					}
					carrier, err := loom.Suspend[string](ctx, "ship")
					return fmt.Sprintf("%s|%d|%s|%s", a.By, c, b.By, carrier), err
				})
			},
			answers: []g1Answer{{gate: "approve-refund", payload: `{"approved":true,"by":"ann"}`},
				{gate: "second-opinion", payload: `{"approved":true,"by":"bob"}`}, {gate: "ship", payload: `"dhl"`}},
		},
		{
			name:  "resume authenticator and authorizer",
			shows: []string{event.ApprovalGranted},
			cfg: func(*ringClock) loom.Config {
				return loom.Config{ResumeAuthenticator: &stubAuthenticator{}, Authorizer: allowAll{}}
			},
			flow: func(choices *atomic.Int64) *loom.Flow {
				return loom.NewFlow("g1", func(ctx *loom.Context, _ int) (string, error) {
					c, err := choice(ctx, choices)
					if err != nil {
						return "", err
					}
					first, err := loom.Suspend[string](ctx, "approve")
					if err != nil {
						return "", err
					}
					second, err := loom.Suspend[string](ctx, "countersign")
					return fmt.Sprintf("%d|%s|%s", c, first, second), err
				})
			},
			answers: []g1Answer{{gate: "approve", payload: `"yes"`, credentials: `"secret"`},
				{gate: "countersign", payload: `"also yes"`, credentials: `"secret"`}},
		},
		{
			name:  "budgets, recorded time and a recorded seed",
			shows: []string{event.DecisionRecorded},
			cfg:   func(*ringClock) loom.Config { return loom.Config{} },
			flow: func(choices *atomic.Int64) *loom.Flow {
				return loom.NewFlow("g1", func(ctx *loom.Context, _ int) (string, error) {
					grant, err := ctx.NegotiateBudget(loom.BudgetRequest{Dimension: "tokens", Request: 5000, Max: 4000})
					if err != nil {
						return "", err
					}
					at := loom.Now(ctx).UnixMilli()
					draw := loom.Random(ctx).Int64()
					// The step keeps the first run's draw: a replay that drew
					// again from a new seed would disagree with it.
					kept, err := ctx.Run("keep", func(context.Context) (any, error) { return draw, nil })
					if err != nil {
						return "", err
					}
					if string(kept) != fmt.Sprint(draw) {
						return "", fmt.Errorf("P9: the replayed draw %d is not the recorded %s", draw, kept)
					}
					c, err := choice(ctx, choices)
					if err != nil {
						return "", err
					}
					ok, err := loom.Suspend[bool](ctx, "approve")
					return fmt.Sprintf("%v|%d|%d|%v", grant, at, c, ok), err
				})
			},
			answers: []g1Answer{{gate: "approve", payload: "true"}},
			seeded:  true,
		},
		{
			name:  "event hooks",
			shows: []string{"progress"},
			cfg: func(*ringClock) loom.Config {
				var n atomic.Int64
				count := func(event.Envelope) { n.Add(1) }
				return loom.Config{OnEvent: count, OnDurableEvent: count}
			},
			flow: func(choices *atomic.Int64) *loom.Flow {
				return loom.NewFlow("g1", func(ctx *loom.Context, _ int) (string, error) {
					if err := ctx.Emit("progress", map[string]int{"at": 1}); err != nil {
						return "", err
					}
					c, err := choice(ctx, choices)
					if err != nil {
						return "", err
					}
					ok, err := loom.Suspend[bool](ctx, "approve")
					return fmt.Sprintf("%d|%v", c, ok), err
				})
			},
			answers: []g1Answer{{gate: "approve", payload: "true"}},
		},
	}
}

type allowAll struct{}

func (allowAll) Authorize(context.Context, loom.AuthzRequest) error { return nil }

// g1Run runs c's flow to completion with sticky parks or re-driven from
// the log at every park, on a fake clock with counted ids, and returns the
// log, the output and the config (for a check by a new runtime).
func g1Run(t *testing.T, c g1Case, sticky bool) ([]event.Envelope, string, loom.Config) {
	t.Helper()
	clk := &ringClock{now: time.UnixMilli(1_700_000_000_000)}
	var choices atomic.Int64
	var mu sync.Mutex
	n := 0
	cfg := c.cfg(clk)
	events := memstore.NewEventStore()
	cfg.Events, cfg.Snapshots, cfg.Clock = events, memstore.NewSnapshotStore(), clk
	cfg.Flows = []*loom.Flow{c.flow(&choices)}
	cfg.Recovery = loom.Recovery{Disabled: true}
	cfg.NewID = func() string { mu.Lock(); defer mu.Unlock(); n++; return fmt.Sprintf("id-%04d", n) }
	if !sticky {
		cfg.StickyParks = -1
	}
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := rt.Start(ctx, "g1", 1, loom.WithExecutionID("g1-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range c.answers {
		st, err := rt.WaitForSuspend(ctx, id)
		if err != nil || st.Variables.SuspendedOn == nil || st.Variables.SuspendedOn.On != a.gate {
			t.Fatalf("parked on %+v (%v), want %s", st.Variables.SuspendedOn, err, a.gate)
		}
		ev := loom.ResumeEvent{EventType: a.gate, Payload: json.RawMessage(a.payload)}
		if a.credentials != "" {
			ev.Credentials = json.RawMessage(a.credentials)
		}
		if err := rt.Resume(ctx, id, ev); err != nil {
			t.Fatal(err)
		}
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("%s %v", res.Status, err)
	}
	log, err := store.Read(ctx, events, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1); sticky && choices.Load() != want {
		t.Fatalf("the choice was computed %d times in place, want once", choices.Load())
	}
	if !sticky && choices.Load() != 1 {
		t.Fatalf("P9: the choice was computed %d times across the replays, want once", choices.Load())
	}
	return log, string(res.Output), cfg
}

func TestG1_EveryCapabilityReplaysItsOwnLogAndServesItsChoices(t *testing.T) {
	for _, c := range g1Cases() {
		t.Run(c.name, func(t *testing.T) {
			inPlace, outA, _ := g1Run(t, c, true)
			replayed, outB, cfg := g1Run(t, c, false)
			for _, typ := range c.shows {
				if !slices.ContainsFunc(replayed, func(e event.Envelope) bool { return e.Type == typ }) {
					t.Fatalf("the log holds no %s: the capability did not act (%v)", typ, types(replayed))
				}
			}
			if len(inPlace) != len(replayed) {
				t.Fatalf("logs differ in length: %v vs %v", types(inPlace), types(replayed))
			}
			for i := range inPlace {
				a, b := inPlace[i], replayed[i]
				a.ID, b.ID = "", ""
				if c.seeded { // the seed, and what it decides, differ between the runs
					if a.Type != b.Type {
						t.Fatalf("event %d is %s in place, %s replayed", i, a.Type, b.Type)
					}
					continue
				}
				ea, _ := event.Encode(a)
				eb, _ := event.Encode(b)
				if string(ea) != string(eb) {
					t.Fatalf("event %d differs:\n in place %s\n replayed %s", i, ea, eb)
				}
			}
			if !c.seeded {
				sa, _ := fold.Encode(fold.Fold(inPlace))
				sb, _ := fold.Encode(fold.Fold(replayed))
				if string(sa) != string(sb) || outA != outB {
					t.Fatalf("the runs end apart: %s vs %s", outA, outB)
				}
			}
			// P2: a new runtime with the same code replays the log to the
			// state it folds to, appending nothing.
			var choices atomic.Int64
			cfg.Events, cfg.Snapshots = memstore.NewEventStore(), memstore.NewSnapshotStore()
			cfg.Flows = []*loom.Flow{c.flow(&choices)}
			check, err := loom.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer check.Close()
			if rep := check.CheckReplay(context.Background(), replayed); !rep.Compatible() {
				t.Fatalf("the log does not replay: %s", rep)
			}
			if choices.Load() != 0 {
				t.Fatal("P9: the check computed the choice")
			}
		})
	}
}
