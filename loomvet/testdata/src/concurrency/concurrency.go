// Package concurrency holds the cases of the goroutine and channel checks.
package concurrency

import (
	"time"

	"github.com/loom-kernel/loom"
)

var Concurrency = loom.NewFlow("concurrency", func(ctx *loom.Context, n int) (int, error) {
	ch := make(chan int, 1)
	go func() { ch <- n }() // want `go statement in flow code: .*: use ctx.Parallel or loom.Parallel` `channel send in flow code: .*the inbox \(loom.Receive, ctx.Select\)`
	v := <-ch               // want `channel receive in flow code`
	select {                // want `select in flow code waits on channels the log does not record.*: use ctx.Select with loom.OnMessage, loom.OnGate and loom.OnTimer, or loom.Receive`
	case ch <- v:
	case w := <-ch:
		v = w
	default:
	}
	for x := range ch { // want `range over a channel in flow code`
		v += x
	}
	close(ch)
	// A Parallel branch is flow code too.
	err := ctx.Parallel(func(c *loom.Context) error {
		v += <-ch // want `channel receive in flow code`
		return nil
	})
	if err != nil {
		return 0, err
	}

	// The kernel's concurrency and waits.
	parts, err := loom.Parallel(ctx,
		func(c *loom.Context) (int, error) { return 1, nil },
		func(c *loom.Context) (int, error) { return 2, nil },
	)
	if err != nil {
		return 0, err
	}
	if _, err := ctx.Select(loom.OnMessage("orders"), loom.OnTimer(time.Hour)); err != nil {
		return 0, err
	}
	msg, err := loom.Receive[int](ctx, "orders")
	return v + parts[0] + parts[1] + msg, err
})
