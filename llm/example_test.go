package llm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/store/memstore"
)

// Complete is a model call as a durable step: the response is recorded,
// metered, and served from the log to every replay.
func ExampleComplete() {
	model := llmtest.NewProvider(nil, "anthropic") // a scripted stand-in for a real provider
	model.Enqueue(llmtest.Text("Roll back v42.", 1200, 40))
	flow := loom.NewFlow("advise", func(ctx *loom.Context, symptom string) (string, error) {
		resp, err := llm.Complete(ctx, "advice", model, llm.Request{
			Model:    "claude-sonnet-4-5",
			System:   "You are the on-call assistant.",
			Messages: []llm.Message{llm.UserText(symptom)},
		})
		return resp.Text, err
	})
	rt, _ := loom.New(loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	id, _ := rt.Start(context.Background(), "advise", "checkout p99 is 2.4 s since the 14:02 deploy")
	res, _ := rt.WaitForCompletion(context.Background(), id)
	r := res.State.Variables.Resources
	fmt.Println(string(res.Output))
	fmt.Printf("tokens %.0f, cost $%.4f\n", *r.Tokens, *r.CostUSD)
	// Output:
	// "Roll back v42."
	// tokens 1240, cost $0.0042
}

// A cassette records what a real provider answered and replays it offline:
// tests and demos stay deterministic and make no network call.
func ExampleOpenCassette() {
	dir, _ := os.MkdirTemp("", "cassette")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "triage.json")
	ctx := context.Background()
	req := llm.Request{Model: "gpt-4.1", Messages: []llm.Message{llm.UserText("Is it the deploy?")}}

	real := llmtest.NewProvider(nil, "openai") // stands in for openai.New(...)
	real.Enqueue(llmtest.Text("Yes: v42 doubled the pool wait.", 30, 9))
	rec, _ := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Record, Provider: real})
	_, _ = rec.Complete(ctx, req, nil)
	_ = rec.Save()

	play, _ := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Replay})
	resp, _ := play.Complete(ctx, req, nil)
	fmt.Println(play.Name(), resp.Text)
	_, err := play.Complete(ctx, llm.Request{Model: "gpt-4.1", Messages: []llm.Message{llm.UserText("Is it DNS?")}}, nil)
	fmt.Println(err != nil)
	// Output:
	// openai Yes: v42 doubled the pool wait.
	// true
}
