package a2a_test

import (
	"context"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/llm"
	a2a "github.com/loom-kernel/loom/plugins/a2a"
	"github.com/loom-kernel/loom/store/memstore"
)

// A grant names one peer's tool id: a principal without it sends nothing.
func TestGrantsArePerPeer(t *testing.T) {
	remote, url := sdkPainter(t)
	ctx := testContext(t)
	peer, err := a2a.Discover(ctx, url, a2a.ClientOptions{Auth: llm.Credential{Key: painterKey}})
	if err != nil {
		t.Fatal(err)
	}
	grants := effect.NewGrantTable()
	if err := grants.Grant("alice", peer.ToolID()); err != nil {
		t.Fatal(err)
	}
	if err := grants.Grant("bob", "a2a.send:someone-else"); err != nil {
		t.Fatal(err)
	}
	cfg := loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{askFlow(&peer)}, Durability: loom.StepDurable, EffectAuthorizer: grants}
	cfg.Recovery.Disabled = true
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })

	bob, err := rt.Start(loom.WithPrincipal(ctx, "bob"), "asker", "the shed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, bob); err == nil {
		t.Fatal("bob's send ran without a grant")
	}
	if n := remote.calls.Load(); n != 0 {
		t.Fatalf("%d remote calls for bob", n)
	}
	alice, err := rt.Start(loom.WithPrincipal(context.Background(), "alice"), "asker", "the shed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if n := remote.calls.Load(); n != 1 {
		t.Fatalf("%d remote calls for alice", n)
	}
}
