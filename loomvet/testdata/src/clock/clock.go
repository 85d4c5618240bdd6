// Package clock holds the cases of the clock check.
package clock

import (
	"context"
	"time"

	"github.com/loom-kernel/loom"
)

// stamp reads the clock in a step's function, which runs once and is
// recorded: not flow code.
var stamp = loom.NewStep("stamp", func(ctx context.Context, _ struct{}) (time.Time, error) {
	return time.Now(), nil
})

var Clock = loom.NewFlow("clock", func(ctx *loom.Context, _ struct{}) (string, error) {
	start := time.Now()                        // want `time.Now in flow code reads the wall clock.*: use loom.Now\(ctx\), a recorded decision`
	_ = time.Since(start)                      // want `time.Since in flow code .*loom.Now\(ctx\)`
	_ = time.Until(start)                      // want `time.Until in flow code .*loom.Now\(ctx\)`
	time.Sleep(time.Second)                    // want `time.Sleep in flow code .*: use ctx.Sleep\(d\) or ctx.SleepUntil\(t\), a durable timer`
	<-time.After(time.Second)                  // want `time.After in flow code .*loom.OnTimer\(d\) in ctx.Select` `channel receive in flow code`
	_ = time.Tick(time.Second)                 // want `time.Tick in flow code`
	_ = time.NewTimer(time.Second)             // want `time.NewTimer in flow code`
	_ = time.NewTicker(time.Second)            // want `time.NewTicker in flow code`
	_ = time.AfterFunc(time.Second, func() {}) // want `time.AfterFunc in flow code`
	clock := time.Now                          // want `time.Now in flow code`
	_ = clock

	// The kernel's replacements, and what only computes on a time value.
	now := loom.Now(ctx)
	_ = now.After(start) // a method of time.Time: pure
	_ = now.Add(time.Minute).Sub(now)
	_ = time.Unix(0, 0)
	_ = time.Duration(3) * time.Second
	if _, err := loom.Run(ctx, stamp, struct{}{}); err != nil {
		return "", err
	}
	if err := ctx.Sleep(time.Minute); err != nil {
		return "", err
	}
	return now.Format(time.RFC3339), nil
})
