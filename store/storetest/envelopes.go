package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// waitTimeout bounds every channel wait of the kits. It is a hang guard,
// never a pacing device: a passing run does not wait for it.
const waitTimeout = 10 * time.Second

// testType is the event type the kits write. It is not a kernel type, so a
// store that inspects types has no reason to treat it specially.
const testType = "STORETEST_EVENT"

// baseTimestamp is the epoch-millisecond timestamp of sequence 0.
const baseTimestamp int64 = 1_700_000_000_000

// envelopeAt returns a valid envelope of exec at seq, with a payload that
// names both, so a misplaced event shows in a diff.
func envelopeAt(exec string, seq int64) event.Envelope {
	return event.Envelope{
		ID:          exec + "#" + strconv.FormatInt(seq, 10),
		WorkflowID:  "wf-storetest",
		ExecutionID: exec,
		Type:        testType,
		Sequence:    seq,
		Timestamp:   baseTimestamp + seq,
		Payload:     json.RawMessage(`{"exec":` + strconv.Quote(exec) + `,"seq":` + strconv.FormatInt(seq, 10) + `}`),
	}
}

// batchAt returns n contiguous envelopes of exec starting at from.
func batchAt(exec string, from int64, n int) []event.Envelope {
	out := make([]event.Envelope, n)
	for i := range out {
		out[i] = envelopeAt(exec, from+int64(i))
	}
	return out
}

// openStore calls newStore, fails on nil, and closes the store at cleanup
// (a store the subtest already closed may answer store.ErrClosed there).
func openStore[S interface{ Close() error }](t *testing.T, what string, newStore func(*testing.T) S) S {
	t.Helper()
	s := newStore(t)
	if any(s) == nil {
		t.Fatalf("storetest: %s returned nil", what)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("storetest: Close at cleanup: %v", err)
		}
	})
	return s
}

// closeStore closes s and requires the first Close to succeed.
func closeStore(t *testing.T, s interface{ Close() error }) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// mustAppend appends and fails the test on any error.
func mustAppend(t *testing.T, s store.EventStore, exec string, expected int64, evs []event.Envelope) {
	t.Helper()
	if err := s.Append(context.Background(), exec, expected, evs); err != nil {
		t.Fatalf("Append(%q, expected %d, %d events): %v", exec, expected, len(evs), err)
	}
}

// readAll returns the whole log of exec and fails the test on an error.
func readAll(t *testing.T, s store.EventStore, exec string) []event.Envelope {
	t.Helper()
	evs, err := s.ReadFrom(context.Background(), exec, 0)
	if err != nil {
		t.Fatalf("ReadFrom(%q, 0): %v", exec, err)
	}
	return evs
}

// assertEvents fails the test unless got equals want envelope by envelope.
func assertEvents(t *testing.T, what string, got, want []event.Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events %v, want %d %v", what, len(got), sequencesOf(got), len(want), sequencesOf(want))
	}
	for i := range want {
		if diff := envelopeDiff(got[i], want[i]); diff != "" {
			t.Fatalf("%s: event %d: %s", what, i, diff)
		}
	}
}

// assertLog fails the test unless the stored log of exec equals want.
func assertLog(t *testing.T, s store.EventStore, exec string, want []event.Envelope) {
	t.Helper()
	assertEvents(t, "log of "+strconv.Quote(exec), readAll(t, s, exec), want)
}

// envelopeDiff describes the first difference between got and want, or
// returns "". Payload bytes must be identical; metadata values must be
// identical up to insignificant whitespace.
func envelopeDiff(got, want event.Envelope) string {
	switch {
	case got.ID != want.ID:
		return fmt.Sprintf("id %q, want %q", got.ID, want.ID)
	case got.WorkflowID != want.WorkflowID:
		return fmt.Sprintf("workflowId %q, want %q", got.WorkflowID, want.WorkflowID)
	case got.ExecutionID != want.ExecutionID:
		return fmt.Sprintf("executionId %q, want %q", got.ExecutionID, want.ExecutionID)
	case got.Type != want.Type:
		return fmt.Sprintf("eventType %q, want %q", got.Type, want.Type)
	case got.Sequence != want.Sequence:
		return fmt.Sprintf("sequence %d, want %d", got.Sequence, want.Sequence)
	case got.Timestamp != want.Timestamp:
		return fmt.Sprintf("timestamp %d, want %d", got.Timestamp, want.Timestamp)
	case !bytes.Equal(got.Payload, want.Payload):
		return "payload " + excerpt(got.Payload) + ", want " + excerpt(want.Payload)
	case len(got.Metadata) != len(want.Metadata):
		return fmt.Sprintf("metadata has %d keys, want %d", len(got.Metadata), len(want.Metadata))
	}
	for k, w := range want.Metadata {
		g, ok := got.Metadata[k]
		if !ok {
			return fmt.Sprintf("metadata key %q missing", k)
		}
		if !bytes.Equal(compactJSON(g), compactJSON(w)) {
			return fmt.Sprintf("metadata %q is %s, want %s", k, excerpt(g), excerpt(w))
		}
	}
	return ""
}

// compactJSON drops insignificant whitespace; invalid JSON is kept as is so
// the comparison still fails on it.
func compactJSON(raw []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// excerpt renders at most 80 bytes of b for a failure message.
func excerpt(b []byte) string {
	if len(b) <= 80 {
		return strconv.Quote(string(b))
	}
	return strconv.Quote(string(b[:80])) + fmt.Sprintf("… (%d bytes)", len(b))
}

// sequencesOf lists the sequences of evs, for failure messages.
func sequencesOf(evs []event.Envelope) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Sequence
	}
	return out
}

// stringPayload returns a JSON string of exactly size bytes (size >= 2)
// with deterministic, varied ASCII content, including <>& and JSON
// punctuation, and no character that needs escaping.
func stringPayload(size int) json.RawMessage {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 <>&{}[]:,.-_"
	b := make([]byte, size)
	b[0], b[size-1] = '"', '"'
	x := uint32(2463534242)
	for i := 1; i < size-1; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = alphabet[x%uint32(len(alphabet))]
	}
	return b
}

// listAll pages through every execution with pageSize and checks the paging
// contract on the way (pageThrough).
func listAll(t *testing.T, s store.EventStore, after string, pageSize int) []store.ExecutionInfo {
	t.Helper()
	return pageThrough(t, "ListExecutions", after, pageSize, func(cursor string) ([]store.ExecutionInfo, string, error) {
		page, err := s.ListExecutions(context.Background(), cursor, pageSize)
		return page.Executions, page.Next, err
	}, func(info store.ExecutionInfo) string { return info.ExecutionID })
}

// pageThrough pages through a listing with pageSize and checks the paging
// contract on the way: ids strictly ascending across pages (code-point
// order, so each id once), at most pageSize per page, and Next "" exactly on
// the last page, which is the one holding the last id.
func pageThrough[T any](t *testing.T, name, after string, pageSize int,
	list func(cursor string) ([]T, string, error), idOf func(T) string) []T {
	t.Helper()
	var all []T
	cursor := after
	for pages := 0; ; pages++ {
		items, next, err := list(cursor)
		if err != nil {
			t.Fatalf("%s(after %q, limit %d): %v", name, cursor, pageSize, err)
		}
		if len(items) > pageSize {
			t.Fatalf("%s(limit %d) returned %d executions", name, pageSize, len(items))
		}
		if len(items) == 0 && pages > 0 {
			t.Fatalf("%s: the page before after %q had Next set but this one is empty: Next must be \"\" on the page holding the last id", name, cursor)
		}
		for _, it := range items {
			id := idOf(it)
			if id <= cursor || (len(all) > 0 && id <= idOf(all[len(all)-1])) {
				t.Fatalf("%s: %q is out of code-point order after %q", name, id, cursor)
			}
			all = append(all, it)
		}
		if next == "" {
			return all
		}
		if len(items) == 0 {
			t.Fatalf("%s(after %q): empty page with Next %q", name, cursor, next)
		}
		if next <= cursor {
			t.Fatalf("%s(after %q): Next %q does not advance", name, cursor, next)
		}
		cursor = next
		if pages > 1_000_000 {
			t.Fatalf("%s: paging does not end", name)
		}
	}
}

// listedIDs pages through every execution and returns their ids.
func listedIDs(t *testing.T, s store.EventStore) []string {
	t.Helper()
	var ids []string
	for _, info := range listAll(t, s, "", 50) {
		ids = append(ids, info.ExecutionID)
	}
	return ids
}

// assertListed fails the test unless the listing holds exactly want.
func assertListed(t *testing.T, s store.EventStore, want ...string) {
	t.Helper()
	got := listedIDs(t, s)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ListExecutions: got %q, want %q", got, want)
	}
}

// itoa formats n for subtest and failure messages.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
