package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/middleware"
)

const apiKey = "sk-live-7f3a9c"

// countingSecrets resolves from a fixed map and counts lookups.
type countingSecrets struct {
	n       atomic.Int64
	secrets middleware.StaticSecrets
}

func (s *countingSecrets) ResolveSecret(ctx context.Context, name string) (string, error) {
	s.n.Add(1)
	return s.secrets.ResolveSecret(ctx, name)
}

// echo returns what it was given as {"got": <input>} after mangling
// nothing, and keeps the input it saw.
type echo struct {
	mu   sync.Mutex
	seen []string
	out  func(in json.RawMessage) (json.RawMessage, error)
}

func (e *echo) Func(_ *effect.Context, in json.RawMessage) (json.RawMessage, error) {
	e.mu.Lock()
	e.seen = append(e.seen, string(in))
	e.mu.Unlock()
	return e.out(in)
}

func (e *echo) last() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) == 0 {
		return ""
	}
	return e.seen[len(e.seen)-1]
}

func redactionRig(t *testing.T, e *echo, input json.RawMessage, res middleware.SecretResolver, outer ...effect.Middleware) (*rig, *counted, *outcome) {
	t.Helper()
	c := &counted{fn: e.Func}
	flow, o := gatedFlow("call", &loom.Task{ID: "call", ToolID: "http.post"}, input)
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{"http.post": c.Func}),
		Middleware: append(outer, middleware.Redaction(res))}, flow)
	return r, c, o
}

// Trigger: the effect gets the value, the log keeps the reference — in
// STEP_STARTED and in the scrubbed output — and the value is nowhere in the
// log. Numbers reach the effect as their literals. The replay neither
// resolves nor runs again.
func TestRedactionResolvesAtCallTimeAndRecordsOnlyTheReference(t *testing.T) {
	secrets := &countingSecrets{secrets: middleware.StaticSecrets{"api-key": apiKey}}
	e := &echo{out: func(json.RawMessage) (json.RawMessage, error) {
		return json.Marshal(map[string]string{"echo": apiKey, "note": "used " + apiKey + " once"})
	}}
	input := json.RawMessage(`{"auth":{"$secret":"api-key"},"n":12345678901234567890,"list":[{"$secret":"api-key"}]}`)
	r, c, o := redactionRig(t, e, input, secrets)
	r.start("call", "s", nil)
	r.parked("s")
	if got, want := e.last(), `{"auth":"`+apiKey+`","list":["`+apiKey+`"],"n":12345678901234567890}`; got != want {
		t.Fatalf("the effect saw\n %s\nwant\n %s", got, want)
	}
	started := r.payloads("s", event.StepStarted)
	if len(started) != 1 || !strings.Contains(started[0], `"input":`+string(input)) {
		t.Fatalf("STEP_STARTED does not keep the reference: %v", started)
	}
	want := `{"echo":{"$secret":"api-key"},"note":"used {\"$secret\":\"api-key\"} once"}`
	if out, err := o.get(); err != nil || string(out) != want {
		t.Fatalf("output %s %v, want %s", out, err, want)
	}
	if strings.Contains(r.logText("s"), apiKey) {
		t.Fatal("the secret value reached the log")
	}
	if secrets.n.Load() != 1 {
		t.Fatalf("%d lookups for one name in one call", secrets.n.Load())
	}
	replayKeepsRingFacts(t, r, "s", c, event.StepStarted, event.StepCompleted)
	if secrets.n.Load() != 1 || strings.Contains(r.logText("s"), apiKey) {
		t.Fatalf("the replay resolved again (%d lookups) or leaked", secrets.n.Load())
	}
}

// A failure's message is scrubbed too, under Retry: neither STEP_RETRYING
// nor STEP_FAILED may carry the value.
func TestRedactionScrubsFailureMessages(t *testing.T) {
	e := &echo{out: func(in json.RawMessage) (json.RawMessage, error) {
		return nil, fmt.Errorf("401 for key %s", apiKey)
	}}
	r, _, o := redactionRig(t, e, json.RawMessage(`{"k":{"$secret":"api-key"}}`),
		middleware.StaticSecrets{"api-key": apiKey},
		middleware.Retry(middleware.RetryPolicy{MaxAttempts: 2, Sleep: (&sleeps{}).Sleep}))
	r.start("call", "f", nil)
	r.parked("f")
	if strings.Contains(r.logText("f"), apiKey) {
		t.Fatal("the secret value reached the log through an error")
	}
	failed := r.payloads("f", event.StepFailed)
	if len(failed) != 1 || failed[0] != `{"error":{"message":"401 for key {\"$secret\":\"api-key\"}"},"stepId":"call"}` {
		t.Fatalf("STEP_FAILED %v", failed)
	}
	if _, err := o.get(); err == nil || strings.Contains(err.Error(), apiKey) {
		t.Fatalf("the flow's error %v", err)
	}
}

// Deny: an unknown name fails the step before the effect runs, with a
// typed error naming the secret; it is not retried.
func TestRedactionRefusesAnUnknownSecret(t *testing.T) {
	e := &echo{out: func(in json.RawMessage) (json.RawMessage, error) { return in, nil }}
	r, c, o := redactionRig(t, e, json.RawMessage(`{"k":{"$secret":"nope"}}`),
		middleware.StaticSecrets{"api-key": apiKey},
		middleware.Retry(middleware.RetryPolicy{Sleep: (&sleeps{}).Sleep}))
	r.start("call", "u", nil)
	r.parked("u")
	var se *middleware.SecretError
	if _, err := o.get(); !errors.As(err, &se) || se.Name != "nope" || !errors.Is(err, middleware.ErrUnknownSecret) {
		t.Fatalf("step error %v", err)
	}
	if c.n.Load() != 0 || len(r.payloads("u", event.StepRetrying)) != 0 {
		t.Fatalf("calls %d, retries %v", c.n.Load(), r.payloads("u", event.StepRetrying))
	}
	failed := r.payloads("u", event.StepFailed)
	if len(failed) != 1 || failed[0] != `{"error":{"message":"middleware: step \"call\": secret \"nope\" is unknown"},"stepId":"call"}` {
		t.Fatalf("STEP_FAILED %v", failed)
	}
}

// Allow: an input without references passes through byte for byte, and its
// output is not scanned.
func TestRedactionPassesInputWithoutReferencesUntouched(t *testing.T) {
	secrets := &countingSecrets{secrets: middleware.StaticSecrets{"api-key": apiKey}}
	e := &echo{out: func(in json.RawMessage) (json.RawMessage, error) { return in, nil }}
	input := json.RawMessage(`{"b": 1.0, "a":"<x>", "$secretive":{"$secret":1,"x":2}}`)
	r, _, o := redactionRig(t, e, input, secrets)
	r.start("call", "p", nil)
	r.parked("p")
	if e.last() != string(input) || secrets.n.Load() != 0 {
		t.Fatalf("the effect saw %s (%d lookups)", e.last(), secrets.n.Load())
	}
	if out, err := o.get(); err != nil || string(out) != string(input) {
		t.Fatalf("output %s %v", out, err)
	}
}

// A non-string name, an over-long one, and more than MaxSecretRefs
// distinct references are refused before anything resolves further.
func TestRedactionBoundsReferences(t *testing.T) {
	many := map[string]any{}
	all := middleware.StaticSecrets{}
	for i := range middleware.MaxSecretRefs + 1 {
		name := fmt.Sprintf("s%03d", i)
		many[name] = map[string]string{middleware.SecretKey: name}
		all[name] = "v"
	}
	tooMany, _ := json.Marshal(many)
	for name, input := range map[string]json.RawMessage{
		"number":   json.RawMessage(`{"$secret":7}`),
		"long":     json.RawMessage(`{"$secret":"` + strings.Repeat("n", middleware.MaxSecretNameBytes+1) + `"}`),
		"too many": tooMany,
	} {
		t.Run(name, func(t *testing.T) {
			e := &echo{out: func(in json.RawMessage) (json.RawMessage, error) { return in, nil }}
			r, c, o := redactionRig(t, e, input, all)
			r.start("call", "b", nil)
			r.parked("b")
			var se *middleware.SecretError
			if _, err := o.get(); !errors.As(err, &se) || !errors.Is(err, middleware.ErrInvalidSecretRef) || c.n.Load() != 0 {
				t.Fatalf("step error %v, calls %d", err, c.n.Load())
			}
		})
	}
}
