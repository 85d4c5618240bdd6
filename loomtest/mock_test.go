package loomtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/loomtest"
)

// charge would call a payment provider; tests mock it by its tool id.
var charge = loom.NewStep("charge", func(ctx context.Context, cents int) (string, error) {
	return "", errors.New("the real payment provider must not be called from a test")
}, loom.ToolID("payments.charge"))

// notify has no tool id: a mock replaces it by its step id.
var notify = loom.NewStep("notify", func(ctx context.Context, msg string) (bool, error) {
	return false, errors.New("the real mailer must not be called from a test")
})

// checkout charges, notifies, and calls an MCP tool through the effect
// registry (a task without Invoke, by a qualified tool id).
var checkout = loom.NewFlow("checkout", func(ctx *loom.Context, cents int) (string, error) {
	receipt, err := loom.Run(ctx, charge, cents)
	if err != nil {
		return "", err
	}
	if _, err := loom.Run(ctx, notify, "paid "+receipt); err != nil {
		return "", err
	}
	raw, err := ctx.Execute(&loom.Task{ID: "ship", ToolID: "mcp.invoke:warehouse/ship"}, map[string]int{"cents": cents})
	if err != nil {
		return "", err
	}
	var label string
	if err := json.Unmarshal(raw, &label); err != nil {
		return "", err
	}
	return receipt + " " + label, nil
})

func TestMocks_ReplaceEffectsByToolIDAndCountCalls(t *testing.T) {
	charged := loomtest.NewMock("payments.charge", func(ctx context.Context, cents int) (string, error) {
		return "rcpt-" + loom.IdempotencyKey(ctx), nil
	})
	notified := loomtest.NewMock("notify", func(ctx context.Context, msg string) (bool, error) { return true, nil })
	shipped := loomtest.NewMock("mcp.invoke", func(ctx context.Context, in struct{ Cents int }) (string, error) {
		return "label-" + loom.EffectContext(ctx).ToolID, nil
	})
	env := loomtest.New(t, loomtest.WithFlows(checkout), loomtest.WithMocks(charged, notified, shipped))
	id := env.Start(t, "checkout", 1250, loom.WithExecutionID("order-1"))

	res := env.WaitForCompletion(t, id)

	if want := `"rcpt-order-1/charge/1 label-mcp.invoke:warehouse/ship"`; string(res.Output) != want {
		t.Errorf("output %s, want %s", res.Output, want)
	}
	for _, m := range []*loomtest.Mock{charged, notified, shipped} {
		if m.Count() != 1 {
			t.Errorf("mock %s ran %d times, want 1", m.ToolID(), m.Count())
		}
	}
	c := charged.Calls()[0]
	if c.StepID != "charge" || c.Attempt != 1 || string(c.Input) != "1250" || c.IdempotencyKey != "order-1/charge/1" {
		t.Errorf("charge call %+v", c)
	}
	if in := string(notified.Calls()[0].Input); in != `"paid rcpt-order-1/charge/1"` {
		t.Errorf("notify input %s", in)
	}
	if fr := res.State.Frames["charge"]; fr.ToolID != "payments.charge" {
		t.Errorf("the log records the tool id %q, want payments.charge", fr.ToolID)
	}
}

func TestMocks_FailureIsTheStepsFailure(t *testing.T) {
	broken := loomtest.NewMock("payments.charge", func(ctx context.Context, cents int) (string, error) {
		return "", errors.New("card declined")
	})
	env := loomtest.New(t, loomtest.WithFlows(checkout), loomtest.WithMocks(broken))
	id := env.Start(t, "checkout", 1)
	st := env.WaitForFailure(t, id)
	if fr := st.Frames["charge"]; fr.Status != "failed" {
		t.Errorf("charge frame %s, want failed", fr.Status)
	}
	if broken.Count() != 1 {
		t.Errorf("ran %d times", broken.Count())
	}
}

func TestMocks_OnePerEnv(t *testing.T) {
	m := loomtest.NewMock("notify", func(ctx context.Context, msg string) (bool, error) { return true, nil })
	loomtest.New(t, loomtest.WithMocks(m))
	mustContain(t, failing(t, func(tb testing.TB) { loomtest.New(tb, loomtest.WithMocks(m)) }),
		`mock "notify" is already used by another Env`)
	a := loomtest.NewMock("x", func(ctx context.Context, _ any) (any, error) { return nil, nil })
	b := loomtest.NewMock("x", func(ctx context.Context, _ any) (any, error) { return nil, nil })
	mustContain(t, failing(t, func(tb testing.TB) { loomtest.New(tb, loomtest.WithMocks(a, b)) }),
		`two mocks of tool "x"`)
}
