// Package durable is keyed, typed, versioned state shared between
// executions — a balance, a counter, a feature flag — whose every read and
// write inside a flow is a recorded step: replay serves the recorded value
// and revision from the log and never reads the store, so a flow that read
// a value once reads the same value on every replay.
//
// Writes are compare-and-set on the key's revision (ADR 0053): Put names
// the revision it read, and a write that lost a race is refused with
// *RevisionConflictError (recorded as the step's typed failure, so replay
// refuses it again). A write retried after a crash that hid its outcome is
// recognised by its writer id (the execution and step) and answered with
// the revision it made, never applied twice.
//
// The values live in a store.ReadModelStore (memory, SQLite or
// PostgreSQL), one row per key under the kind "state:<namespace>", owned
// by the projection "loom.durable:<namespace>"; its watermark per key is
// the revision before the latest write, so the store's own atomic
// compare-and-set orders concurrent writers on any number of nodes.
package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Store is a namespace of keyed values of type T.
type Store[T any] struct {
	models    store.ReadModelStore
	namespace string
}

// New returns the namespace's store over models. namespace is an id
// (event.ValidateID).
func New[T any](models store.ReadModelStore, namespace string) (*Store[T], error) {
	if models == nil {
		return nil, errors.New("durable: New needs a read-model store")
	}
	if err := event.ValidateID("namespace", namespace); err != nil {
		return nil, err
	}
	return &Store[T]{models: models, namespace: namespace}, nil
}

// Value is a key's value as read or written: Revision 0 and Found false
// for a key never written (or deleted).
type Value[T any] struct {
	Value    T     `json:"value"`
	Revision int64 `json:"revision"`
	Found    bool  `json:"found"`
}

// ConflictChannel is the typed-failure channel of a refused write: the
// step records it, so replay refuses the same write again.
const ConflictChannel = "durable.revision-conflict"

// RevisionConflictError refuses a Put or Delete whose expected revision is
// not the key's: another writer got there first. Read again and retry.
type RevisionConflictError struct {
	Key      string `json:"key"`
	Expected int64  `json:"expected"`
	Actual   int64  `json:"actual"`
}

func (e *RevisionConflictError) Error() string {
	return fmt.Sprintf("durable: %q is at revision %d, not %d: read it again and retry", e.Key, e.Actual, e.Expected)
}

// Get reads key in a recorded step stepID (an id unique in the flow, as
// for any step): live it reads the store, on replay the log.
func (s *Store[T]) Get(c *loom.Context, stepID, key string) (Value[T], error) {
	if err := event.ValidateID("key", key); err != nil {
		return Value[T]{}, err
	}
	raw, err := c.Execute(&loom.Task{ID: stepID, Kind: "state.get", ReadOnly: true,
		Invoke: func(ctx context.Context, _ json.RawMessage) (any, error) { return s.read(ctx, key) }}, map[string]string{"key": key})
	if err != nil {
		return Value[T]{}, err
	}
	return decode[T](raw)
}

// Put writes value under key if the key is still at revision expect (0:
// the key must be absent), in a recorded step stepID, and returns the new
// revision. A lost race is a *RevisionConflictError.
func (s *Store[T]) Put(c *loom.Context, stepID, key string, value T, expect int64) (Value[T], error) {
	return s.write(c, stepID, key, &value, expect)
}

// Delete removes key if it is still at revision expect.
func (s *Store[T]) Delete(c *loom.Context, stepID, key string, expect int64) error {
	_, err := s.write(c, stepID, key, nil, expect)
	return err
}

// Peek reads key outside any flow (a screen, a test): not recorded.
func (s *Store[T]) Peek(ctx context.Context, key string) (Value[T], error) {
	v, err := s.read(ctx, key)
	if err != nil {
		return Value[T]{}, err
	}
	raw, _ := json.Marshal(v)
	return decode[T](raw)
}

// row is a key's stored document: the value and who wrote it last.
type row struct {
	Value  json.RawMessage `json:"value"`
	Writer string          `json:"writer"`
}

// stored is a read's output, as recorded.
type stored struct {
	Value    json.RawMessage `json:"value"`
	Revision int64           `json:"revision"`
	Found    bool            `json:"found"`
}

func (s *Store[T]) kind() string       { return "state:" + s.namespace }
func (s *Store[T]) projection() string { return "loom.durable:" + s.namespace }

func (s *Store[T]) read(ctx context.Context, key string) (stored, error) {
	r, ok, err := s.models.Get(ctx, s.kind(), key)
	if err != nil || !ok {
		return stored{Value: json.RawMessage("null")}, err
	}
	var d row
	if err := json.Unmarshal(r.Doc, &d); err != nil {
		return stored{}, fmt.Errorf("durable: the stored value of %q is unreadable: %w", key, err)
	}
	return stored{Value: d.Value, Revision: r.Version, Found: true}, nil
}

func (s *Store[T]) write(c *loom.Context, stepID, key string, value *T, expect int64) (Value[T], error) {
	if err := event.ValidateID("key", key); err != nil {
		return Value[T]{}, err
	}
	if expect < 0 {
		return Value[T]{}, fmt.Errorf("durable: expected revision %d: use 0 for an absent key, or the revision read", expect)
	}
	var doc json.RawMessage
	if value != nil {
		b, err := json.Marshal(*value)
		if err != nil {
			return Value[T]{}, fmt.Errorf("durable: encoding the value of %q: %w", key, err)
		}
		doc = b
	}
	in := map[string]any{"key": key, "expect": expect, "delete": value == nil}
	raw, err := c.Execute(&loom.Task{ID: stepID, Kind: "state.put", Errors: map[string]string{ConflictChannel: `{"type":"object"}`},
		Invoke: func(ctx context.Context, _ json.RawMessage) (any, error) {
			return s.apply(ctx, key, doc, value == nil, expect, writerOf(ctx, stepID))
		}}, in)
	var tf *loom.TypedFailure
	if errors.As(err, &tf) && tf.Channel == ConflictChannel {
		var ce RevisionConflictError
		_ = json.Unmarshal(tf.Payload, &ce)
		ce.Key = key
		return Value[T]{}, &ce
	}
	if err != nil {
		return Value[T]{}, err
	}
	return decode[T](raw)
}

// writerOf names a write's writer: its execution and step, the same on a
// retry of the attempt.
func writerOf(ctx context.Context, stepID string) string {
	if ec := effect.FromContext(ctx); ec != nil {
		return ec.ExecutionID + "/" + stepID
	}
	return stepID
}

// apply performs the compare-and-set.
func (s *Store[T]) apply(ctx context.Context, key string, doc json.RawMessage, del bool, expect int64, writer string) (stored, error) {
	cur, err := s.read(ctx, key)
	if err != nil {
		return stored{}, err
	}
	if cur.Revision != expect {
		// A retry of this very write (its outcome lost in a crash) finds
		// its own revision: answer it, do not write again.
		if r, ok, err := s.models.Get(ctx, s.kind(), key); err == nil && ok && cur.Revision == expect+1 {
			var d row
			if json.Unmarshal(r.Doc, &d) == nil && d.Writer == writer && !del {
				return cur, nil
			}
		}
		return stored{}, loom.Fail(ConflictChannel, RevisionConflictError{Key: key, Expected: expect, Actual: cur.Revision})
	}
	from := expect - 1
	if expect == 0 {
		from = store.NoWatermark
	}
	w := store.ReadModelWrite{Row: store.ReadModel{Kind: s.kind(), ID: key}, ExpectVersion: expect, Delete: del}
	if !del {
		w.Row.Doc, _ = json.Marshal(row{Value: doc, Writer: writer})
	}
	err = s.models.Apply(ctx, s.projection(), key, from, from+1, []store.ReadModelWrite{w})
	var wc *store.WatermarkConflictError
	var vc *store.ReadModelVersionConflictError
	if errors.As(err, &wc) || errors.As(err, &vc) {
		now, rerr := s.read(ctx, key)
		if rerr != nil {
			return stored{}, rerr
		}
		return stored{}, loom.Fail(ConflictChannel, RevisionConflictError{Key: key, Expected: expect, Actual: now.Revision})
	}
	if err != nil {
		return stored{}, err
	}
	if del {
		return stored{Value: json.RawMessage("null")}, nil
	}
	return stored{Value: doc, Revision: expect + 1, Found: true}, nil
}

func decode[T any](raw json.RawMessage) (Value[T], error) {
	var st stored
	if err := json.Unmarshal(raw, &st); err != nil {
		return Value[T]{}, fmt.Errorf("durable: the recorded value is unreadable: %w", err)
	}
	v := Value[T]{Revision: st.Revision, Found: st.Found}
	if st.Found && len(st.Value) > 0 {
		if err := json.Unmarshal(st.Value, &v.Value); err != nil {
			return Value[T]{}, fmt.Errorf("durable: decoding the value: %w", err)
		}
	}
	return v, nil
}
