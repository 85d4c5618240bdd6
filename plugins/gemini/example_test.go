package gemini_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/gemini"
	"github.com/loom-kernel/loom/plugins/gemini/geminitest"
)

// Example streams one answer from a local fake of the Gemini API; in
// production BaseURL is left empty and the key comes from GEMINI_API_KEY.
func Example() {
	tb := &exampleTB{} // the fake reports to a test; an example has none
	defer tb.cleanup()
	srv := geminitest.NewServer(tb)
	srv.Enqueue(llmtest.Reply{Response: llm.Response{Model: "gemini-2.5-flash", Text: "Roll back the 14:02 deploy.",
		StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 40, OutputTokens: 8, CacheReadTokens: 10}}})

	p, err := gemini.New(gemini.Options{Credential: llm.Credential{Key: "example-key"}, BaseURL: srv.URL()})
	if err != nil {
		fmt.Println(err)
		return
	}
	fragments := 0
	resp, err := p.Complete(context.Background(), llm.Request{
		Model:    "gemini-2.5-flash",
		System:   "You are the on-call assistant.",
		Messages: []llm.Message{llm.UserText("checkout is slow since 14:05")},
	}, func(d llm.Delta) { fragments++ })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text)
	fmt.Println(resp.StopReason, resp.Usage.InputTokens, resp.Usage.CacheReadTokens, resp.Usage.OutputTokens)
	fmt.Println(fragments > 1)
	// Output:
	// Roll back the 14:02 deploy.
	// end 40 10 8
	// true
}

// exampleTB is the little of testing.TB the fake server uses, for an
// example that runs outside a test: failures are printed (and would break
// the example's output), cleanups run when the example ends.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (e *exampleTB) Helper()                      {}
func (e *exampleTB) Cleanup(f func())             { e.cleanups = append(e.cleanups, f) }
func (e *exampleTB) Errorf(f string, args ...any) { fmt.Printf("fake server: "+f+"\n", args...) }

func (e *exampleTB) cleanup() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}
