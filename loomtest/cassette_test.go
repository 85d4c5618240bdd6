package loomtest_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/loomtest"
)

// advise is an agent-like flow: one model call, recorded as a step.
func advise(model llm.Provider) *loom.Flow {
	return loom.NewFlow("advise", func(ctx *loom.Context, symptom string) (string, error) {
		resp, err := llm.Complete(ctx, "advice", model, llm.Request{
			Model:    "claude-sonnet-4-5",
			System:   "You are the on-call assistant.",
			Messages: []llm.Message{llm.UserText(symptom)},
		})
		return resp.Text, err
	})
}

// noNetwork is a live provider a replaying test must never ask for.
func noNetwork(t *testing.T) func() (llm.Provider, error) {
	return func() (llm.Provider, error) {
		t.Error("the replay asked for the live provider")
		return nil, errors.New("no network in tests")
	}
}

func TestCassette_ReplaysTheCommittedRecording(t *testing.T) {
	model := loomtest.Cassette(t, filepath.Join("testdata", "cassettes", "advice.json"), noNetwork(t))
	env := loomtest.New(t, loomtest.WithFlows(advise(model)))
	id := env.Start(t, "advise", "checkout p99 is 2.4 s since the 14:02 deploy")
	if res := env.WaitForCompletion(t, id); string(res.Output) != `"Roll back v42."` {
		t.Errorf("output %s", res.Output)
	}
}

func TestCassette_RecordsThenReplaysOffline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cassettes", "triage.json")
	t.Run("record", func(t *testing.T) {
		live := llmtest.NewProvider(t, "anthropic") // stands in for the real provider
		live.Enqueue(llmtest.Text("It is the deploy.", 20, 5))
		model := loomtest.OpenCassette(t, path, func() (llm.Provider, error) { return live, nil }, true)
		env := loomtest.New(t, loomtest.WithFlows(advise(model)))
		env.WaitForCompletion(t, env.Start(t, "advise", "is it the deploy?"))
	}) // the cleanup saved the cassette
	t.Run("replay", func(t *testing.T) {
		model := loomtest.OpenCassette(t, path, noNetwork(t), false)
		env := loomtest.New(t, loomtest.WithFlows(advise(model)))
		if res := env.WaitForCompletion(t, env.Start(t, "advise", "is it the deploy?")); string(res.Output) != `"It is the deploy."` {
			t.Errorf("output %s", res.Output)
		}
		// A request the cassette does not hold fails the step, offline.
		env.WaitForFailure(t, env.Start(t, "advise", "is it DNS?"))
	})
}

func TestCassette_MissingFileSaysHowToRecordIt(t *testing.T) {
	mustContain(t, failing(t, func(tb testing.TB) {
		loomtest.Cassette(tb, filepath.Join(t.TempDir(), "none.json"), noNetwork(t))
	}), "none.json", "-loomtest.record")
}

func TestMocks_ReplaceAModelCallByItsToolID(t *testing.T) {
	model := loomtest.Cassette(t, filepath.Join("testdata", "cassettes", "advice.json"), noNetwork(t))
	mocked := loomtest.NewMock(llm.ToolID(model.Name(), "claude-sonnet-4-5"),
		func(ctx context.Context, call llm.CallRecord) (llm.Response, error) {
			return llm.Response{Text: "Page the database team.", Model: call.Model}, nil
		})
	env := loomtest.New(t, loomtest.WithFlows(advise(model)), loomtest.WithMocks(mocked))
	id := env.Start(t, "advise", "a question the cassette never heard")
	if res := env.WaitForCompletion(t, id); string(res.Output) != `"Page the database team."` {
		t.Errorf("output %s", res.Output)
	}
	if mocked.Count() != 1 || mocked.Calls()[0].StepID != "advice" {
		t.Errorf("calls %+v", mocked.Calls())
	}
}
