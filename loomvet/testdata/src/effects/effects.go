// Package effects holds the effects loomvet must not descend into: they
// run live once and are recorded, so they may read the clock, draw and do
// I/O.
package effects

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
)

// tool stands for an agent tool of another package: a function literal
// that takes a context.Context is an effect by its signature.
func tool(fn func(ctx context.Context, q string) (string, error)) func(ctx context.Context, q string) (string, error) {
	return fn
}

var Effects = loom.NewFlow("effects", func(ctx *loom.Context, in string) (string, error) {
	// A step built in the flow body, with its simulation.
	stamp := loom.NewStep("stamp", func(ctx context.Context, in string) (string, error) {
		return time.Now().Format(time.RFC3339) + in, nil
	}, loom.Simulation(func(ctx context.Context, in string) (string, error) {
		ch := make(chan string, 1)
		go func() { ch <- time.Now().String() }()
		return <-ch, nil
	}))
	s, err := loom.Run(ctx, stamp, in)
	if err != nil {
		return "", err
	}
	// ctx.Run's function, directly and through a variable.
	if _, err := ctx.Run("env", func(ctx context.Context) (any, error) { return os.Getenv("REGION"), nil }); err != nil {
		return "", err
	}
	read := func(ctx context.Context) (any, error) { return os.ReadFile("config.json") }
	if _, err := ctx.Run("read", read); err != nil {
		return "", err
	}
	// A Task's Invoke in a literal, and its Simulate by assignment.
	t := &loom.Task{ID: "ping", Invoke: func(ctx context.Context, _ json.RawMessage) (any, error) {
		resp, err := http.Get("https://example.com")
		if err != nil {
			return nil, err
		}
		return resp.StatusCode, resp.Body.Close()
	}}
	t.Simulate = func(ctx context.Context, _ json.RawMessage) (any, error) {
		time.Sleep(time.Millisecond)
		return 200, nil
	}
	if _, err := ctx.Execute(t, nil); err != nil {
		return "", err
	}
	// A registered effect's signature takes an *effect.Context.
	var fx effect.Func = func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		return json.Marshal(rand.IntN(10))
	}
	_ = fx
	// An effect by its signature.
	search := tool(func(ctx context.Context, q string) (string, error) {
		return time.Now().String() + q, nil
	})
	_ = search

	// The code around the effects is flow code.
	_ = time.Now() // want `time.Now in flow code`
	return s, nil
})
