// Package loopid holds the cases of the loop-id check.
package loopid

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom"
)

func pay(ctx context.Context, amount int) (string, error) { return fmt.Sprint(amount), nil }

var charge = loom.NewStep("charge", pay)

var steps = []*loom.Step[int, string]{charge, loom.NewStep("refund", pay)}

var Loops = loom.NewFlow("loops", func(ctx *loom.Context, amounts []int) ([]string, error) {
	for _, a := range amounts {
		loom.Run(ctx, charge, a) // want `loom.Run in a loop runs step charge under the same id on every iteration: later iterations are served the first one's outcome \(or refused with \*StepReusedError\): use charge.Iter\(i\)`
	}
	for i := range amounts {
		s := charge
		loom.Run(ctx, s, i) // want `loom.Run in a loop runs step s under the same id`
	}
	for i, a := range amounts {
		fixed := loom.NewStep("fixed", pay)
		loom.Run(ctx, fixed, a)                       // want `loom.Run in a loop runs step fixed under the same id`
		loom.Run(ctx, loom.NewStep("inline", pay), i) // want `loom.Run in a loop runs step loom.NewStep\("inline", pay\) under the same id`
	}
	for _, a := range amounts {
		ctx.Run("audit", func(context.Context) (any, error) { return a, nil }) // want `ctx.Run in a loop under the constant id "audit": later iterations are served the first one's outcome .*: use a loop-varying id`
		loom.Decide(ctx, "pick", func() (int, error) { return a, nil })        // want `loom.Decide in a loop under the constant id "pick": deciding an id again in a run fails with \*StepReusedError: use a loop-varying id`
		ctx.Decide("choose", func() (any, error) { return a, nil })            // want `ctx.Decide in a loop under the constant id "choose"`
		loom.SpawnChild(ctx, "child", "kid", a)                                // want `loom.SpawnChild in a loop under the constant id "kid": spawning a name again returns the first child`
		ctx.Execute(&loom.Task{ID: "raw", Invoke: invoke}, a)                  // want `ctx.Execute in a loop runs a Task under the constant id "raw"`
		ctx.Run(fmt.Sprintf("audit-%d", a), func(context.Context) (any, error) { return a, nil })
		loom.SpawnChild(ctx, "child", fmt.Sprint("kid-", a), a)
		ctx.Execute(&loom.Task{ID: fmt.Sprint("raw-", a), Invoke: invoke}, a)
	}
	// A branch made in a loop runs once per iteration.
	var branches []func(*loom.Context) (string, error)
	for i, a := range amounts {
		branches = append(branches, func(c *loom.Context) (string, error) { return loom.Run(c, charge, a) }) // want `loom.Run in a loop runs step charge`
		branches = append(branches, func(c *loom.Context) (string, error) { return loom.Run(c, charge.Iter(i), a) })
	}
	var field struct{ step *loom.Step[int, string] }
	field.step = charge
	for range 2 {
		for _, a := range amounts {
			s := charge.Iter(0)
			loom.Run(ctx, s, a)               // want `loom.Run in a loop runs step s under the same id`
			loom.Run(ctx, charge.Retry(1), a) // want `loom.Run in a loop runs step charge.Retry\(1\) under the same id`
			loom.Run(ctx, field.step, a)      // want `loom.Run in a loop runs step field.step under the same id`
		}
	}

	// Steps whose id varies, and steps outside a loop.
	out := []string{}
	for i, a := range amounts {
		id, _ := loom.Run(ctx, charge.Iter(i), a)
		out = append(out, id)
		s := charge.Iter(i)
		loom.Run(ctx, s, a)
		named := loom.NewStep(fmt.Sprintf("charge-%d", i), pay)
		loom.Run(ctx, named, a)
	}
	var cur *loom.Step[int, string]
	for i := 0; i < len(amounts); i++ {
		cur = charge.Iter(i)
		loom.Run(ctx, cur, amounts[i])
	}
	for attempt := range 3 {
		loom.Run(ctx, charge.Retry(attempt), 1)
	}
	for _, s := range steps {
		loom.Run(ctx, s, 1) // each step of the slice has its own id
	}
	for i := range steps {
		loom.Run(ctx, steps[i], 1)
	}
	for attempt := 0; attempt < 3; attempt++ {
		//loomvet:ok an untyped failure is not served on replay: each attempt runs it again under one id
		if _, err := loom.Run(ctx, charge, 1); err == nil {
			break
		}
	}
	loom.Run(ctx, charge, 1)
	ctx.Run("once", func(context.Context) (any, error) { return nil, nil })
	if _, err := loom.Parallel(ctx, branches...); err != nil {
		return nil, err
	}
	return out, nil
})

func invoke(ctx context.Context, in json.RawMessage) (any, error) { return nil, nil }
