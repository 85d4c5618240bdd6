package openai_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/openai"
	"github.com/loom-kernel/loom/plugins/openai/openaitest"
)

// Example streams an answer from the local fake of the API. Against the
// real API, build the provider with openai.New(openai.Options{}) and set
// OPENAI_API_KEY.
func Example() {
	t := &exampleT{}
	defer t.cleanup()
	fake := openaitest.NewServer(t)
	fake.Enqueue(llmtest.Reply{Response: llm.Response{Model: "gpt-4o-mini", Text: "Roll back the 14:02 deploy.",
		StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 21, OutputTokens: 9}}})

	p, err := openai.New(openai.Options{Credential: llm.Credential{Key: "sk-example"}, BaseURL: fake.URL()})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := llm.Request{Model: "gpt-4o-mini", System: "You are the on-call assistant.",
		Messages: []llm.Message{llm.UserText("checkout is slow: what now?")}}
	fragments := 0
	resp, err := p.Complete(context.Background(), req, func(d llm.Delta) { fragments++ })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text)
	fmt.Println(resp.StopReason, resp.Usage.InputTokens, resp.Usage.OutputTokens, fragments > 1)
	// Output:
	// Roll back the 14:02 deploy.
	// end 21 9 true
}

// exampleT is the testing.TB an Example has none of: it runs cleanups at
// the end and prints a failure (which then fails the Example's output).
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (t *exampleT) Helper()                           {}
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Errorf(format string, args ...any) { fmt.Printf("error: "+format+"\n", args...) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
