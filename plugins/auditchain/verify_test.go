package auditchain_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/auditchain"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func envelopes(id string, from, n int) []event.Envelope {
	out := make([]event.Envelope, n)
	for i := range out {
		seq := int64(from + i)
		out[i] = event.Envelope{ID: fmt.Sprintf("%s-%d", id, seq), WorkflowID: "wf", ExecutionID: id, Type: "APP_EVENT",
			Sequence: seq, Timestamp: 1000 + seq, Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, seq))}
	}
	out[0].Metadata = map[string]json.RawMessage{"kernel": json.RawMessage(`true`)}
	return out
}

// chainedLog appends n events to a fresh chained memstore in batches of 3
// and returns the stored log, members included.
func chainedLog(t *testing.T, n int, opts auditchain.Options) []event.Envelope {
	t.Helper()
	s := wrap(t, memstore.NewEventStore(), opts)
	ctx := testContext(t)
	for from := 0; from < n; from += 3 {
		if err := s.Append(ctx, "x", int64(from), envelopes("x", from, min(3, n-from))); err != nil {
			t.Fatal(err)
		}
	}
	log, err := s.Inner().ReadFrom(ctx, "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// TestChainVerifyReasons: each kind of damage to a log is named, at its
// sequence, by its own reason.
func TestChainVerifyReasons(t *testing.T) {
	opts := auditchain.Options{Key: testKey}
	clone := func(log []event.Envelope) []event.Envelope {
		out := make([]event.Envelope, len(log))
		for i, e := range log {
			e.Metadata = maps(e.Metadata)
			out[i] = e
		}
		return out
	}
	for _, c := range []struct {
		name   string
		damage func(log []event.Envelope) []event.Envelope
		seq    int64
		reason auditchain.Reason
	}{
		{"payload", func(l []event.Envelope) []event.Envelope { l[4].Payload = json.RawMessage(`{"n":40}`); return l }, 4, auditchain.ReasonEdited},
		{"metadata", func(l []event.Envelope) []event.Envelope {
			l[0].Metadata["kernel"] = json.RawMessage(`false`)
			return l
		}, 0, auditchain.ReasonEdited},
		{"link", func(l []event.Envelope) []event.Envelope {
			l[5].Metadata[auditchain.MetadataKey] = l[6].Metadata[auditchain.MetadataKey]
			return l
		}, 5, auditchain.ReasonEdited},
		{"gap", func(l []event.Envelope) []event.Envelope { return append(l[:2], l[3:]...) }, 2, auditchain.ReasonDeleted},
		{"renumbered", func(l []event.Envelope) []event.Envelope {
			l = append(l[:2], l[4:]...)
			for i := 2; i < len(l); i++ {
				l[i].Sequence -= 2
			}
			return l
		}, 2, auditchain.ReasonDeleted},
		{"swapped", func(l []event.Envelope) []event.Envelope {
			l[6], l[7] = l[7], l[6]
			l[6].Sequence, l[7].Sequence = 6, 7
			return l
		}, 6, auditchain.ReasonReordered},
		{"out of order", func(l []event.Envelope) []event.Envelope { l[6], l[7] = l[7], l[6]; return l }, 6, auditchain.ReasonReordered},
		{"unchained", func(l []event.Envelope) []event.Envelope { delete(l[3].Metadata, auditchain.MetadataKey); return l }, 3, auditchain.ReasonUnchained},
		{"malformed", func(l []event.Envelope) []event.Envelope {
			l[3].Metadata[auditchain.MetadataKey] = json.RawMessage(`"sha256:zz"`)
			return l
		}, 3, auditchain.ReasonMalformed},
		{"foreign", func(l []event.Envelope) []event.Envelope { l[1].ExecutionID = "y"; return l }, 1, auditchain.ReasonMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := chainedLog(t, 10, opts)
			if r := auditchain.Verify(log, opts); !r.OK || r.Length != 10 || r.Head == "" {
				t.Fatalf("the intact log: %+v", r)
			}
			r := auditchain.Verify(c.damage(clone(log)), opts)
			if r.OK || r.Sequence != c.seq || r.Reason != c.reason || r.Detail == "" {
				t.Fatalf("Verify = %+v, want a failure at #%d for %q", r, c.seq, c.reason)
			}
		})
	}
}

func maps(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestChainConflictLeavesNothingHalfChained: appenders racing for one
// sequence each chain on the same head; exactly one batch lands, whole,
// and the next append (through another wrapper, with no cache) continues
// the chain the winner wrote.
func TestChainConflictLeavesNothingHalfChained(t *testing.T) {
	inner := memstore.NewEventStore()
	s := wrap(t, inner, auditchain.Options{Key: testKey})
	ctx := testContext(t)
	if err := s.Append(ctx, "x", 0, envelopes("x", 0, 2)); err != nil {
		t.Fatal(err)
	}
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			batch := envelopes("x", 2, 3)
			batch[1].Payload = json.RawMessage(fmt.Sprintf(`{"racer":%d}`, i))
			errs[i] = s.Append(ctx, "x", 2, batch)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrSequenceConflict):
			t.Fatalf("a loser got %v, want a sequence conflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d appenders won, want 1", won)
	}
	other := wrap(t, inner, auditchain.Options{Key: testKey, CacheSize: -1})
	if err := other.Append(ctx, "x", 5, envelopes("x", 5, 1)); err != nil {
		t.Fatal(err)
	}
	// A refused append (fenced out) leaves the cache as the log is.
	token, err := s.AcquireFence(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.AcquireFence(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendFenced(ctx, "x", token, 6, envelopes("x", 6, 1)); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a stale fence's append = %v, want store.ErrFenced", err)
	}
	if err := s.Append(ctx, "x", 6, envelopes("x", 6, 2)); err != nil {
		t.Fatal(err)
	}
	if r := mustVerify(t, s, "x", auditchain.Options{Key: testKey}); r.Length != 8 {
		t.Fatalf("the log has %d events, want 8", r.Length)
	}
}

// TestChainAppendRefusesUnchainedLog: a log written before the chain was
// wired cannot be continued by it.
func TestChainAppendRefusesUnchainedLog(t *testing.T) {
	inner := memstore.NewEventStore()
	ctx := testContext(t)
	if err := inner.Append(ctx, "x", 0, envelopes("x", 0, 2)); err != nil {
		t.Fatal(err)
	}
	s := wrap(t, inner, auditchain.Options{})
	var ce *auditchain.ChainError
	if err := s.Append(ctx, "x", 2, envelopes("x", 2, 1)); !errors.As(err, &ce) || ce.Sequence != 1 || ce.Reason != auditchain.ReasonUnchained {
		t.Fatalf("Append onto an unchained log = %v, want *ChainError at #1", err)
	}
}
