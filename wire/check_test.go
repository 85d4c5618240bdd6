package wire_test

import (
	"errors"
	"maps"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/wire"
)

// execution.checkReplay judges a stored log against the app's code over
// HTTP, scoped to the caller's tenant; every refusal is typed, and no
// check appends anything.
func TestCheckReplayOverTheWire(t *testing.T) {
	e := newListEnv(t, nil)
	e.start(t, "ann", "park", "b")
	before := e.lengths(t)

	res, err := e.callers["ann"].CheckReplay(testCtx(t), wire.CheckReplayParams{ExecutionID: "b"})
	if err != nil || res.ExecutionID != "b" || !res.Report.Compatible() || res.Report.FlowID != "park" ||
		res.Report.Status != "suspended" || res.Report.Length != int(before["b"]) {
		t.Fatalf("checkReplay: %+v, %v", res, err)
	}
	var raw struct {
		ExecutionID string         `json:"executionId"`
		Report      map[string]any `json:"report"`
	}
	if err := e.callers["ops"].Call(testCtx(t), wire.MethodCheck, map[string]any{"executionId": "b"}, &raw); err != nil ||
		raw.ExecutionID != "b" || raw.Report["verdict"] != "compatible" || raw.Report["executionId"] != "b" {
		t.Fatalf("raw result: %v, %v", raw, err)
	}

	var we *wire.Error
	for _, c := range []struct {
		name   string
		who    string
		params any
		code   int
	}{
		{"another tenant's execution", "bob", map[string]any{"executionId": "b"}, wire.CodeExecutionNotFound},
		{"an unknown execution", "ops", map[string]any{"executionId": "nobody"}, wire.CodeExecutionNotFound},
		{"no executionId", "ops", map[string]any{}, wire.CodeInvalidParams},
		{"an unknown member", "ops", map[string]any{"executionId": "b", "at": 1}, wire.CodeInvalidParams},
		{"a malformed id", "ops", map[string]any{"executionId": "b\x00"}, wire.CodeInvalidInput},
	} {
		err := e.callers[c.who].Call(testCtx(t), wire.MethodCheck, c.params, nil)
		if !errors.As(err, &we) || we.Code != c.code {
			t.Errorf("%s: %v, want code %d", c.name, err, c.code)
		}
	}
	if _, err := e.callers["bob"].CheckReplay(testCtx(t), wire.CheckReplayParams{ExecutionID: "b"}); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("another tenant's execution: %v", err)
	}
	if after := e.lengths(t); !maps.Equal(after, before) {
		t.Fatalf("a check appended: %v, was %v", after, before)
	}
}
