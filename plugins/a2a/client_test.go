package a2a_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/llm"
	a2a "github.com/loom-kernel/loom/plugins/a2a"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// painter is an AgentExecutor of the SDK: a new task asks which color
// (input-required); the answer completes it with the artifact
// "painted <color>". It counts its executions: the remote calls made.
type painter struct{ calls atomic.Int64 }

func (p *painter) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[protocol.Event, error] {
	p.calls.Add(1)
	return func(yield func(protocol.Event, error) bool) {
		if ec.StoredTask == nil {
			if !yield(protocol.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			ask := protocol.NewMessage(protocol.MessageRoleAgent, protocol.NewTextPart("which color?"))
			yield(protocol.NewStatusUpdateEvent(ec, protocol.TaskStateInputRequired, ask), nil)
			return
		}
		var color []string
		for _, part := range ec.Message.Parts {
			color = append(color, part.Text())
		}
		if !yield(protocol.NewArtifactEvent(ec, protocol.NewTextPart("painted "+strings.Join(color, ""))), nil) {
			return
		}
		yield(protocol.NewStatusUpdateEvent(ec, protocol.TaskStateCompleted, nil), nil)
	}
}

func (p *painter) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[protocol.Event, error] {
	return func(yield func(protocol.Event, error) bool) {
		yield(protocol.NewStatusUpdateEvent(ec, protocol.TaskStateCanceled, nil), nil)
	}
}

const painterKey = "s3cret-painter-key"

// sdkPainter serves painter with the SDK's own handler, on loopback,
// behind a bearer key.
func sdkPainter(t *testing.T) (*painter, string) {
	t.Helper()
	p := &painter{}
	mux := http.NewServeMux()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+painterKey {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	card := &protocol.AgentCard{Name: "Painter Bot!", Description: "Paints things.", Version: "1",
		SupportedInterfaces: []*protocol.AgentInterface{protocol.NewAgentInterface(ts.URL+"/invoke", protocol.TransportProtocolJSONRPC)},
		Skills:              []protocol.AgentSkill{{ID: "paint", Name: "paint", Description: "Paint one thing."}}}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(p)))
	return p, ts.URL
}

// askFlow asks peer (set before the flow runs) what its input says.
func askFlow(peer **a2a.Peer) *loom.Flow {
	return loom.NewFlow("asker", func(ctx *loom.Context, what string) (a2a.Outcome, error) {
		return a2a.Ask(ctx, "ask", *peer, what)
	})
}

func outcomeOf(t *testing.T, raw json.RawMessage) a2a.Outcome {
	t.Helper()
	var o a2a.Outcome
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("decoding the outcome %s: %v", raw, err)
	}
	return o
}

func events(t *testing.T, stores store.Set, id string) []event.Envelope {
	t.Helper()
	evs, err := stores.Events.ReadFrom(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestDiscoverReadsTheCardAndSendsTheCredential(t *testing.T) {
	_, url := sdkPainter(t)
	ctx := testContext(t)
	if _, err := a2a.Discover(ctx, url, a2a.ClientOptions{}); err == nil {
		t.Fatal("Discover without the key succeeded")
	}
	_, err := a2a.Discover(ctx, url, a2a.ClientOptions{Auth: llm.Credential{Env: "A2A_TEST_UNSET_KEY"}})
	if !errors.Is(err, llm.ErrNoCredential) {
		t.Fatalf("an unset key: err = %v", err)
	}
	peer, err := a2a.Discover(ctx, url, a2a.ClientOptions{Auth: llm.Credential{Key: painterKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = peer.Close() }()
	if peer.Name() != "Painter_Bot_" || peer.ToolID() != "a2a.send:Painter_Bot_" || peer.Description() != "Paints things." {
		t.Fatalf("peer %q %q %q", peer.Name(), peer.ToolID(), peer.Description())
	}
}

// An input-required answer of an SDK-built agent parks the flow on a
// local gate; the gate's answer, given to a new runtime, goes to the same
// remote task, and the send that completed before is not made again.
func TestAskMapsRemoteInputRequiredToALocalGateAndReplaysNoSend(t *testing.T) {
	remote, url := sdkPainter(t)
	ctx := testContext(t)
	t.Setenv("A2A_TEST_PAINTER_KEY", painterKey)
	peer, err := a2a.Discover(ctx, url, a2a.ClientOptions{Auth: llm.Credential{Env: "A2A_TEST_PAINTER_KEY"}})
	if err != nil {
		t.Fatal(err)
	}
	stores := memstore.NewSet()
	rt1 := newRuntime(t, stores, nil, askFlow(&peer))
	id, err := rt1.Start(ctx, "asker", "the shed")
	if err != nil {
		t.Fatal(err)
	}
	st, err := rt1.WaitForSuspend(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	asked := outcomeOf(t, st.Frames["ask"].Output)
	gate := st.Variables.SuspendedOn.On
	if asked.State != a2a.StateInputRequired || asked.Text != "which color?" || gate != a2a.AskGate(asked.TaskID, 1) {
		t.Fatalf("parked on %q after %+v", gate, asked)
	}
	if n := remote.calls.Load(); n != 1 {
		t.Fatalf("%d remote calls before the answer", n)
	}
	if err := rt1.Close(); err != nil {
		t.Fatal(err)
	}

	rt2 := newRuntime(t, stores, nil, askFlow(&peer))
	if err := rt2.Resume(ctx, id, loom.ResumeEvent{EventType: gate, Payload: json.RawMessage(`"blue"`)}); err != nil {
		t.Fatal(err)
	}
	res, err := rt2.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	done := outcomeOf(t, res.Output)
	if done.State != a2a.StateCompleted || done.TaskID != asked.TaskID || done.Text != "painted blue" {
		t.Fatalf("outcome %+v", done)
	}
	if n := remote.calls.Load(); n != 2 {
		t.Fatalf("%d remote calls, want 2: the replayed send was made again", n)
	}
	var states []string
	for _, e := range events(t, stores, id) {
		if bytes.Contains(e.Payload, []byte(painterKey)) {
			t.Fatalf("the credential is in the log: %s %s", e.Type, e.Payload)
		}
		switch e.Type {
		case a2a.FactTask:
			var f struct{ State, TaskID string }
			if err := json.Unmarshal(e.Payload, &f); err != nil || f.TaskID != asked.TaskID {
				t.Fatalf("fact %s (%v)", e.Payload, err)
			}
			states = append(states, f.State)
		case event.StepStarted:
			var s struct{ ToolID string }
			if err := json.Unmarshal(e.Payload, &s); err != nil || s.ToolID != "a2a.send:Painter_Bot_" {
				t.Fatalf("step %s (%v)", e.Payload, err)
			}
		}
	}
	if strings.Join(states, ",") != "input-required,completed" {
		t.Fatalf("task facts %v", states)
	}
}

// Ask against a Loom server: the remote gate's schema reaches the local
// outcome, and the local gate's structured answer resumes the remote gate.
func TestAskAgainstALoomServer(t *testing.T) {
	remote := publish(t, nil)
	ctx := testContext(t)
	peer, err := a2a.Discover(ctx, remote.url+"/agents/approver", a2a.ClientOptions{Auth: llm.Credential{Key: "alice-token"}})
	if err != nil {
		t.Fatal(err)
	}
	stores := memstore.NewSet()
	rt := newRuntime(t, stores, nil, askFlow(&peer))
	id, err := rt.Start(ctx, "asker", "deploy")
	if err != nil {
		t.Fatal(err)
	}
	st, err := rt.WaitForSuspend(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	asked := outcomeOf(t, st.Frames["ask"].Output)
	if asked.State != a2a.StateInputRequired || asked.Gate != "approve" || !strings.Contains(string(asked.InputSchema), `"ok"`) {
		t.Fatalf("outcome %+v", asked)
	}
	if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: st.Variables.SuspendedOn.On, Payload: json.RawMessage(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if done := outcomeOf(t, res.Output); done.State != a2a.StateCompleted || done.Text != "approved deploy" || done.TaskID != asked.TaskID {
		t.Fatalf("outcome %+v", done)
	}
	remoteState, err := remote.rt.LoadState(ctx, asked.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	var p loom.Principal
	if err := json.Unmarshal(remoteState.Variables.Principal, &p); err != nil || p.ID != "alice" {
		t.Fatalf("remote principal %s (%v)", remoteState.Variables.Principal, err)
	}
}

// The a2a.send effect refuses an input that names another peer than its
// qualified tool id, before anything is sent.
func TestSendEffectRefusesAnotherPeerThanItsToolID(t *testing.T) {
	remote, url := sdkPainter(t)
	ctx := testContext(t)
	peer, err := a2a.Discover(ctx, url, a2a.ClientOptions{Auth: llm.Credential{Key: painterKey}})
	if err != nil {
		t.Fatal(err)
	}
	stores := memstore.NewSet()
	flow := loom.NewFlow("sneaky", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		return ctx.Execute(&loom.Task{ID: "send", Kind: "tool", ToolID: "a2a.send:someone-else"},
			a2a.SendInput{Agent: peer.Name(), Message: "paint"})
	})
	rt := newRuntime(t, stores, a2a.Effects(peer), flow)
	id, err := rt.Start(ctx, "sneaky", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, id); err == nil {
		t.Fatal("the send to another peer completed")
	}
	st, err := rt.LoadState(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if msg := string(st.Frames["send"].Error); !strings.Contains(msg, a2a.ErrUnknownPeer.Error()) {
		t.Fatalf("step error %s", msg)
	}
	if n := remote.calls.Load(); n != 0 {
		t.Fatalf("%d remote calls", n)
	}
}
