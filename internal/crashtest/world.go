package crashtest

import (
	"encoding/json"
	"sync"
)

// World is the outside world of one case: what the flow's effects did,
// shared by every runtime of the case, since effects outlive a crashed
// process. The kit reads it directly to judge a recovery, as an operator
// would look at the payment provider before answering an in-doubt park.
type World struct {
	// Counters count every effect that acted, by step (and decision) id.
	Counters *Counters
	// Charged records what the non-idempotent steps did, by idempotency
	// key: the kit's view of the provider they charge.
	Charged *Sink
	// Delivered is the counting sink of the idempotent delivering steps.
	Delivered *Sink

	mu     sync.Mutex
	killIn string // the step whose effect kills the process on entry
	kill   func()
}

// newWorld returns an untouched world for a variant.
func newWorld(v Variant) *World {
	return &World{Counters: newCounters(v.spec().counted()...), Charged: NewSink(), Delivered: NewSink()}
}

// armKill makes the next entry into step's effect call kill and fail with
// ErrKilled before the step acts. An empty step disarms it.
func (w *World) armKill(step string, kill func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.killIn, w.kill = step, kill
}

// tripKill reports whether step's effect must die now, killing the process
// (once) if so.
func (w *World) tripKill(step string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if step == "" || w.killIn != step {
		return false
	}
	w.kill()
	w.killIn, w.kill = "", nil
	return true
}

// Sink is a counting sink: an outside system that receives effects under
// an idempotency key. It records each distinct key once, with the first
// payload delivered under it, and counts every delivery; a receiver that
// deduplicates by key performs len(Keys(step)) logical effects, however
// often a crashed attempt was re-run. Safe for concurrent use.
type Sink struct {
	mu    sync.Mutex
	keys  map[string][]string // step → distinct keys, first seen first
	first map[string]json.RawMessage
	total map[string]int // step → deliveries
}

// NewSink returns an empty sink.
func NewSink() *Sink {
	return &Sink{keys: map[string][]string{}, first: map[string]json.RawMessage{}, total: map[string]int{}}
}

// Deliver records one delivery of payload by step under key.
func (s *Sink) Deliver(step, key string, payload json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total[step]++
	if _, seen := s.first[key]; seen {
		return
	}
	s.first[key] = append(json.RawMessage(nil), payload...)
	s.keys[step] = append(s.keys[step], key)
}

// Keys returns the distinct keys step delivered under, first seen first.
func (s *Sink) Keys(step string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys[step]...)
}

// Deliveries returns how many times step delivered, duplicates included.
func (s *Sink) Deliveries(step string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total[step]
}

// Payload returns the first payload delivered under key.
func (s *Sink) Payload(key string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.first[key]
	return p, ok
}
