package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

var inboxOn = loom.Config{Features: loom.Features{Inbox: true}}

// collector receives n messages on "orders" and returns them in order.
func collector(n int) *loom.Flow {
	return loom.NewFlow("collect", func(ctx *loom.Context, _ struct{}) ([]int, error) {
		var got []int
		for range n {
			v, err := loom.Receive[int](ctx, "orders")
			if err != nil {
				return nil, err
			}
			got = append(got, v)
		}
		return got, nil
	})
}

func withSticky(cfg loom.Config, sticky bool) loom.Config {
	if !sticky {
		cfg.StickyParks = -1
	}
	return cfg
}

func TestInboxDeliversInOrderExactlyOnce(t *testing.T) {
	for _, sticky := range []bool{true, false} {
		t.Run(fmt.Sprint("sticky=", sticky), func(t *testing.T) {
			h := newHarnessWith(t, withSticky(inboxOn, sticky), collector(3))
			id, _ := h.rt.Start(h.ctx(), "collect", nil)
			// One message before the flow waits, two while it is parked.
			if err := h.rt.Send(h.ctx(), id, "orders", 1); err != nil {
				t.Fatal(err)
			}
			for _, v := range []int{2, 3} {
				if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
					t.Fatal(err)
				}
				if err := h.rt.Send(h.ctx(), id, "orders", v); err != nil {
					t.Fatal(err)
				}
			}
			res, err := h.rt.WaitForCompletion(h.ctx(), id)
			if err != nil || string(res.Output) != "[1,2,3]" {
				t.Fatalf("%s %v", res.Output, err)
			}
			if n := count(h, id, event.MessageConsumed); n != 3 {
				t.Fatalf("MESSAGE_CONSUMED %d times", n)
			}
			if c := res.State.Variables.Inbox["orders"]; c.Consumed != 3 {
				t.Fatalf("_inbox cursor %+v", c)
			}
		})
	}
}

func TestInboxSurvivesAProcessStoppingBetweenSendAndConsume(t *testing.T) {
	h := newHarnessWith(t, inboxOn, collector(2))
	id, _ := h.rt.Start(h.ctx(), "collect", nil)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	h.rt.Close() // the receiver's process is gone
	other := h.open(collector(2))
	if err := other.Send(h.ctx(), id, "orders", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := other.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	if err := other.Send(h.ctx(), id, "orders", 8); err != nil {
		t.Fatal(err)
	}
	res, err := other.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != "[7,8]" {
		t.Fatalf("%s %v", res.Output, err)
	}
}

func TestInboxSendRefusals(t *testing.T) {
	off := newHarness(t, collector(1))
	id, _ := off.rt.Start(off.ctx(), "collect", nil)
	if err := off.rt.Send(off.ctx(), id, "orders", 1); !errors.Is(err, loom.ErrFeatureDisabled) {
		t.Fatalf("send with the inbox off: %v", err)
	}
	quick := loom.NewFlow("quick", func(ctx *loom.Context, _ struct{}) (int, error) { return 1, nil })
	h := newHarnessWith(t, inboxOn, quick)
	done, _ := h.rt.Start(h.ctx(), "quick", nil)
	if _, err := h.rt.WaitForCompletion(h.ctx(), done); err != nil {
		t.Fatal(err)
	}
	before := len(h.log(done))
	var sr *loom.SendRefusedError
	if err := h.rt.Send(h.ctx(), done, "orders", 1); !errors.As(err, &sr) {
		t.Fatalf("send to an ended execution: %v", err)
	}
	if len(h.log(done)) != before {
		t.Fatal("a refused send appended to the execution")
	}
	if err := h.rt.Send(h.ctx(), "missing", "orders", 1); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("send to nobody: %v", err)
	}
	if err := h.rt.Send(h.ctx(), done, "bad\x00topic", 1); !errors.Is(err, event.ErrInvalidEnvelope) {
		t.Fatalf("bad topic: %v", err)
	}
}

func TestSelectOverMessagesGatesAndTimers(t *testing.T) {
	flow := loom.NewFlow("sel", func(ctx *loom.Context, _ struct{}) ([]string, error) {
		var out []string
		for range 3 {
			sel, err := ctx.Select(loom.OnMessage("chat"), loom.OnGate("stop"), loom.OnTimer(time.Minute))
			if err != nil {
				return nil, err
			}
			out = append(out, fmt.Sprintf("%d:%s", sel.Index, sel.Kind))
		}
		return out, nil
	})
	for _, sticky := range []bool{true, false} {
		t.Run(fmt.Sprint("sticky=", sticky), func(t *testing.T) {
			h, clock, _ := timed(t, withSticky(inboxOn, sticky), flow)
			id, _ := h.rt.Start(h.ctx(), "sel", nil)
			if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
				t.Fatal(err)
			}
			if err := h.rt.Send(h.ctx(), id, "chat", "hi"); err != nil {
				t.Fatal(err)
			}
			st, err := h.rt.WaitForSuspend(h.ctx(), id)
			if err != nil || st.Variables.SuspendedOn.On != "__loom_select__" {
				t.Fatalf("%+v %v", st.Variables.SuspendedOn, err)
			}
			// A gate the select does not wait on is refused; the one it does is taken.
			var rr *loom.ResumeRefusedError
			if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "other"}); !errors.As(err, &rr) {
				t.Fatalf("stray gate: %v", err)
			}
			if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "stop", Payload: json.RawMessage(`true`)}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
				t.Fatal(err)
			}
			clock.advance(2 * time.Minute)
			if n, err := h.rt.FireDueTimers(h.ctx()); n != 1 || err != nil {
				t.Fatalf("fired %d: %v", n, err)
			}
			res, err := h.rt.WaitForCompletion(h.ctx(), id)
			if err != nil || string(res.Output) != `["0:message","1:gate","2:timer"]` {
				t.Fatalf("%s %v", res.Output, err)
			}
			if len(res.State.Variables.ResumePayloads) != 0 || len(res.State.Variables.WaitAnswers) != 3 {
				t.Fatalf("answers %+v / %+v", res.State.Variables.ResumePayloads, res.State.Variables.WaitAnswers)
			}
		})
	}
}

func TestAForkHasItsOwnInboxWithItsParentsConsumedMessages(t *testing.T) {
	h := newHarnessWith(t, inboxOn, collector(2))
	id, _ := h.rt.Start(h.ctx(), "collect", nil)
	if err := h.rt.Send(h.ctx(), id, "orders", 1); err != nil {
		t.Fatal(err)
	}
	var at int64
	waitUntil(t, h, id, func(s fold.State) bool {
		at = s.Sequence
		return s.Status == fold.StatusSuspended && s.Variables.Inbox["orders"].Consumed == 1
	})
	fork, err := h.rt.Fork(h.ctx(), id, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Send(h.ctx(), id, "orders", 2); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Send(h.ctx(), fork, "orders", 20); err != nil {
		t.Fatal(err)
	}
	a, errA := h.rt.WaitForCompletion(h.ctx(), id)
	b, errB := h.rt.WaitForCompletion(h.ctx(), fork)
	if errA != nil || errB != nil || string(a.Output) != "[1,2]" || string(b.Output) != "[1,20]" {
		t.Fatalf("parent %s %v, fork %s %v", a.Output, errA, b.Output, errB)
	}
}

// indexedCounting counts the events a store hands out per execution and
// keeps the memory store's status index visible, so recovery pages it.
type indexedCounting struct {
	*memstore.EventStore
	mu   sync.Mutex
	read map[string]int
}

func (c *indexedCounting) ReadFrom(ctx context.Context, id string, from int64) ([]event.Envelope, error) {
	c.mu.Lock()
	c.read[id]++
	c.mu.Unlock()
	return c.EventStore.ReadFrom(ctx, id, from)
}

func (c *indexedCounting) reads(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read[id]
}

// Recovery loads a parked execution only when a message could await it:
// without the inbox a gate park has nothing recovery could do, so many
// parked executions cost a pass nothing but the index walk; with it, a
// message that reached a select park while no process could deliver it is
// delivered by the next Recover.
func TestRecoveryLoadsParkedExecutionsOnlyWhenAMessageCouldAwaitThem(t *testing.T) {
	t.Run("inbox off: a gate park is not loaded", func(t *testing.T) {
		gated := loom.NewFlow("gated", func(ctx *loom.Context, _ struct{}) (int, error) {
			_, err := ctx.Suspend("approve")
			return 1, err
		})
		h := newHarnessWith(t, loom.Config{StickyParks: -1}, gated)
		id, _ := h.rt.Start(h.ctx(), "gated", nil)
		if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
		h.rt.Close()
		counting := &indexedCounting{EventStore: h.events, read: map[string]int{}}
		next, err := loom.New(loom.Config{Events: counting, Snapshots: h.snaps, Flows: []*loom.Flow{gated},
			StickyParks: -1, Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer next.Close()
		n, err := next.Recover(h.ctx())
		if err != nil || n != 0 {
			t.Fatalf("Recover: %d %v", n, err)
		}
		if got := counting.reads(id); got != 0 {
			t.Fatalf("the pass read the parked execution's log %d times", got)
		}
	})
	t.Run("inbox on: an undelivered message is delivered", func(t *testing.T) {
		h := newHarnessWith(t, withSticky(inboxOn, false), collector(1))
		id, _ := h.rt.Start(h.ctx(), "collect", nil)
		if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
		h.rt.Close()
		// A process that does not know the flow takes the message durably
		// but cannot deliver it.
		if err := h.open().Send(h.ctx(), id, "orders", 5); err != nil {
			t.Fatal(err)
		}
		if s, err := h.open().LoadState(h.ctx(), id); err != nil || s.Status != fold.StatusSuspended {
			t.Fatalf("delivered by a process without the flow: %s %v", s.Status, err)
		}
		next := h.open(collector(1))
		if _, err := next.Recover(h.ctx()); err != nil {
			t.Fatal(err)
		}
		res, err := next.WaitForCompletion(h.ctx(), id)
		if err != nil || string(res.Output) != "[5]" {
			t.Fatalf("%s %v", res.Output, err)
		}
	})
}

// logRefuser refuses every append to one execution's log (its inbox
// streams are other ids): a sender whose delivery failed after the message
// was durable, as a process crashing between the two leaves it.
type logRefuser struct {
	*memstore.EventStore
	id string
}

var errDeliveryLost = errors.New("the sender's process died")

func (l logRefuser) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	if id == l.id {
		return errDeliveryLost
	}
	return l.EventStore.Append(ctx, id, expected, evs)
}

func (l logRefuser) AppendFenced(ctx context.Context, id string, token, expected int64, evs []event.Envelope) error {
	if id == l.id {
		return errDeliveryLost
	}
	return l.EventStore.AppendFenced(ctx, id, token, expected, evs)
}

// passCounter counts the listings of unfinished executions a recovery
// pass begins with.
type passCounter struct {
	*memstore.EventStore
	passes atomic.Int64
}

func (p *passCounter) ListUnfinished(ctx context.Context, after string, limit int) (store.UnfinishedPage, error) {
	page, err := p.EventStore.ListUnfinished(ctx, after, limit)
	p.passes.Add(1)
	return page, err
}

// A message that is durable but whose delivery was lost reaches a parked
// receiver through the periodic recovery of a process that never
// restarts: every Recovery.ParkedEvery-th pass looks at parked executions,
// not the first one alone.
func TestPeriodicRecoveryDeliversAMessageWhoseWakeUpWasLost(t *testing.T) {
	ctx := testCtx(t)
	mem := &passCounter{EventStore: memstore.NewEventStore()}
	rt, err := loom.New(loom.Config{Events: mem, Flows: []*loom.Flow{collector(1)}, Features: loom.Features{Inbox: true},
		StickyParks: -1, Recovery: loom.Recovery{Interval: time.Millisecond, ParkedEvery: 3}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	id, err := rt.Start(ctx, "collect", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The first pass, which looks at parked executions anyway, is over
	// once the second one lists.
	for mem.passes.Load() < 2 {
		runtime.Gosched()
	}
	sender, err := loom.New(loom.Config{Events: logRefuser{mem.EventStore, id}, Flows: []*loom.Flow{collector(1)},
		Features: loom.Features{Inbox: true}, Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	if err := sender.Send(ctx, id, "orders", 5); err != nil {
		t.Fatal(err) // the message is durable; its delivery is best effort
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil || string(res.Output) != "[5]" {
		t.Fatalf("%s %v", res.Output, err)
	}
}
