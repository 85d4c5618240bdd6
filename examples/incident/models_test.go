package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/llm"
)

// TestCommittedCassetteIsTheScriptedRecording: recording every scenario
// from the scripted model again gives the committed cassette byte for
// byte — the committed file is what the code says it is. (A cassette
// refreshed from a real model is not checked this way.)
func TestCommittedCassetteIsTheScriptedRecording(t *testing.T) {
	var head struct {
		Provider string `json:"provider"`
	}
	if err := json.Unmarshal(committedCassette, &head); err != nil {
		t.Fatal(err)
	}
	if head.Provider != scriptedProvider {
		t.Skipf("the committed cassette was recorded from %s, not the scripted model", head.Provider)
	}
	path := filepath.Join(t.TempDir(), "planner.json")
	if _, err := recordCassette(testContext(t), path, scriptedModel{}, scriptedModelName, io.Discard); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, committedCassette) {
		t.Fatalf("recording the scenarios from the scripted model gives another cassette than %s: re-record it "+
			"(go run ./examples/incident demo -record) and regenerate the golden histories", cassetteName)
	}
}

// TestScrubRequest: the scrub replaces apply_fix's change id and a
// rejection's reason, leaves every other result alone, and never edits the
// request it was given.
func TestScrubRequest(t *testing.T) {
	req := llm.Request{Model: "m", Messages: []llm.Message{
		llm.UserText("Service: checkout"),
		{Role: llm.RoleTool, ToolResults: []llm.ToolResult{
			{CallID: "a", Name: toolApply, Content: `{"change":"chg-0123abcd","detail":"applied"}`},
			{CallID: "b", Name: toolApply, IsError: true, Content: `{"error":"the call was rejected by its approver: it is Friday"}`},
			{CallID: "c", Name: toolPropose, Content: `{"note":"chg-0123abcd"}`},
		}},
	}}
	orig, _ := json.Marshal(req)
	got := scrubRequest(req)
	if after, _ := json.Marshal(req); !bytes.Equal(orig, after) {
		t.Fatalf("the scrub edited its input:\n%s\n%s", orig, after)
	}
	rs := got.Messages[1].ToolResults
	if rs[0].Content != `{"change":"chg-<id>","detail":"applied"}` || rs[1].Content != scrubbedRejected || rs[2].Content != `{"note":"chg-0123abcd"}` {
		t.Fatalf("scrubbed: %+v", rs)
	}
}

// TestLiveProviderNeedsItsKey: -provider X without X's API key is refused
// before anything runs (no database is created), naming the variable; with
// a key the provider is built (and never called: tests make no live call).
func TestLiveProviderNeedsItsKey(t *testing.T) {
	for name, live := range liveModels { //loom:order-independent each checked alone
		t.Run(name, func(t *testing.T) {
			t.Setenv(live.env, "")
			db := filepath.Join(t.TempDir(), "live.db")
			var out, errOut bytes.Buffer
			if code := run([]string{"start", "-provider", name, "-db", db}, &out, &errOut); code != 1 ||
				!strings.Contains(errOut.String(), "set "+live.env) {
				t.Fatalf("start -provider %s without a key: exit %d, %s", name, code, errOut.String())
			}
			if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused live start created %s (%v)", db, err)
			}
			t.Setenv(live.env, "test-key-never-sent")
			m, err := modelFlags{provider: name}.open()
			if err != nil || m.provider.Name() != name || m.name != live.model {
				t.Fatalf("-provider %s with a key: %v %+v", name, err, m)
			}
		})
	}
}

// TestScriptedModelPlansAnyIncident: -provider scripted needs no cassette:
// an incident the cassette does not hold is planned offline to its gate.
func TestScriptedModelPlansAnyIncident(t *testing.T) {
	ctx := testContext(t)
	sc := scenario{name: "other", input: Incident{Service: "payments", Symptom: "error rate up"}, answer: approveAs("gil")}
	m, err := modelFlags{provider: scriptedProvider}.open()
	if err != nil {
		t.Fatal(err)
	}
	p, err := play(ctx, sc, m, "inc-other")
	if err != nil || len(p.gates) != 1 || p.summary.Outcome != outcomeFixed {
		t.Fatalf("planning payments with the scripted model: %+v %v", p, err)
	}
	_, err = play(ctx, sc, committedModel(t), "inc-other")
	var te *loom.ExecutionTerminatedError
	if !errors.As(err, &te) || te.State.Status != fold.StatusFailed || !strings.Contains(string(te.State.Variables.Error), "holds no request") {
		t.Fatalf("the committed cassette answered an incident it never recorded: %v", err)
	}
}
