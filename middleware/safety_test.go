package middleware_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/middleware"
)

// noCards is a validator that refuses a payload holding "4111" and counts
// its checks.
func noCards(checks *atomic.Int64) middleware.Validator {
	check := func(_ *effect.Context, raw json.RawMessage) error {
		checks.Add(1)
		if bytes.Contains(raw, []byte("4111")) {
			return errors.New("contains a card number")
		}
		return nil
	}
	return middleware.Validator{Name: "pii", Input: check, Output: check}
}

func safetyRig(t *testing.T, out string, input any, vs ...middleware.Validator) (*rig, *counted, *outcome) {
	t.Helper()
	c := &counted{fn: func(*effect.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(out), nil }}
	flow, o := gatedFlow("mail", &loom.Task{ID: "send", ToolID: "mail.send"}, input)
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{"mail.send": c.Func}),
		Middleware: []effect.Middleware{middleware.Safety(vs...)}}, flow)
	return r, c, o
}

// Allow: clean input and output pass through unchanged; nothing recorded;
// the replay runs no validator.
func TestSafetyPassesCleanTraffic(t *testing.T) {
	var checks atomic.Int64
	r, c, o := safetyRig(t, `{"sent":true}`, map[string]string{"to": "ada"}, noCards(&checks))
	r.start("mail", "ok", nil)
	r.parked("ok")
	if out, err := o.get(); err != nil || string(out) != `{"sent":true}` || checks.Load() != 2 {
		t.Fatalf("%s %v, %d checks", out, err, checks.Load())
	}
	replayKeepsRingFacts(t, r, "ok", c, event.SafetyBlocked)
	if checks.Load() != 2 {
		t.Fatalf("the replay ran validators: %d checks", checks.Load())
	}
}

// Deny on input: the effect never runs; SAFETY_BLOCKED names the validator
// and the phase, and its reason is the validator's, never the payload.
func TestSafetyBlocksUnsafeInputWithoutRunningTheEffect(t *testing.T) {
	var checks atomic.Int64
	r, c, o := safetyRig(t, `{"sent":true}`, map[string]string{"body": "card 4111-1111"}, noCards(&checks))
	r.start("mail", "in", nil)
	st := r.parked("in")
	if c.n.Load() != 0 {
		t.Fatal("the effect ran on a blocked input")
	}
	want := []string{`{"stepId":"send","toolId":"mail.send","validator":"pii","phase":"input","reason":"contains a card number"}`}
	if got := r.payloads("in", event.SafetyBlocked); !reflect.DeepEqual(got, want) {
		t.Fatalf("SAFETY_BLOCKED\n got %v\nwant %v", got, want)
	}
	var sb *middleware.SafetyBlockedError
	if _, err := o.get(); !errors.As(err, &sb) || sb.Phase != middleware.PhaseInput || sb.Validator != "pii" {
		t.Fatalf("step error %v", err)
	}
	if v := st.Variables.Verdicts; len(v) != 1 || v[0].Type != event.SafetyBlocked || v[0].StepID != "send" {
		t.Fatalf("verdicts %+v", v)
	}
	if fr := st.Frames["send"]; fr.Status != fold.FrameFailed {
		t.Fatalf("frame %+v", fr)
	}
}

// Deny on output: the effect ran, but its output is discarded — the step
// fails and the output is nowhere in the log.
func TestSafetyBlocksUnsafeOutputBeforeItIsRecorded(t *testing.T) {
	var checks atomic.Int64
	r, c, o := safetyRig(t, `{"echo":"4111-1111-1111-1111"}`, nil, noCards(&checks))
	r.start("mail", "out", nil)
	r.parked("out")
	if c.n.Load() != 1 {
		t.Fatalf("effect calls %d", c.n.Load())
	}
	want := []string{`{"stepId":"send","toolId":"mail.send","validator":"pii","phase":"output","reason":"contains a card number"}`}
	if got := r.payloads("out", event.SafetyBlocked); !reflect.DeepEqual(got, want) {
		t.Fatalf("SAFETY_BLOCKED %v", got)
	}
	if strings.Contains(r.logText("out"), "4111") {
		t.Fatal("the blocked output reached the log")
	}
	if len(r.payloads("out", event.StepCompleted)) != 0 {
		t.Fatal("a blocked step completed")
	}
	var sb *middleware.SafetyBlockedError
	if _, err := o.get(); !errors.As(err, &sb) || sb.Phase != middleware.PhaseOutput {
		t.Fatalf("step error %v", err)
	}
}

// The first violation wins, in argument order; an unnamed validator is
// named by its position; a long reason is cut to fold.MaxReasonBytes.
func TestSafetyReportsTheFirstViolationBounded(t *testing.T) {
	long := strings.Repeat("€", fold.MaxReasonBytes) // 3 bytes a rune: cut on a rune boundary
	first := middleware.Validator{Input: func(*effect.Context, json.RawMessage) error { return errors.New(long) }}
	second := middleware.Validator{Name: "never", Input: func(*effect.Context, json.RawMessage) error {
		t.Error("a validator ran after a violation")
		return nil
	}}
	r, c, _ := safetyRig(t, `1`, nil, first, second)
	r.start("mail", "b", nil)
	r.parked("b")
	var p struct{ Validator, Reason string }
	got := r.payloads("b", event.SafetyBlocked)
	if len(got) != 1 || json.Unmarshal([]byte(got[0]), &p) != nil {
		t.Fatalf("SAFETY_BLOCKED %v", got)
	}
	if p.Validator != "validator#0" || len(p.Reason) != fold.MaxReasonBytes-2 || !utf8.ValidString(p.Reason) || c.n.Load() != 0 {
		t.Fatalf("validator %q, reason %d bytes, calls %d", p.Validator, len(p.Reason), c.n.Load())
	}
}

// A failed effect's error passes through: output validators see only
// results.
func TestSafetyLeavesFailuresToTheStep(t *testing.T) {
	var checks atomic.Int64
	flow, o := gatedFlow("mail", &loom.Task{ID: "send", ToolID: "mail.send"}, nil)
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{
		"mail.send": func(*effect.Context, json.RawMessage) (json.RawMessage, error) { return nil, errors.New("smtp down") },
	}), Middleware: []effect.Middleware{middleware.Safety(noCards(&checks))}}, flow)
	r.start("mail", "f", nil)
	r.parked("f")
	var se *loom.StepError
	if _, err := o.get(); !errors.As(err, &se) || se.Message != "smtp down" || checks.Load() != 1 {
		t.Fatalf("step error %v, checks %d", err, checks.Load())
	}
	if len(r.payloads("f", event.SafetyBlocked)) != 0 {
		t.Fatal("a failure was recorded as a safety block")
	}
}
