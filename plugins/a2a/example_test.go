package a2a_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/loom-kernel/loom"
	a2a "github.com/loom-kernel/loom/plugins/a2a"
	"github.com/loom-kernel/loom/store/memstore"
)

// A flow published as an A2A agent, called from another runtime's flow
// through Ask. The example runs insecure, on loopback only.
func Example() {
	ctx := context.Background()
	greet := loom.NewFlow("greet", func(ctx *loom.Context, name string) (string, error) {
		return "hello, " + name, nil
	})
	remote, err := loom.New(loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{greet}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = remote.Close() }()
	srv, err := a2a.NewServer(remote, a2a.ServerOptions{
		Agents:   []a2a.PublishedAgent{{Name: "greeter", Description: "Greets.", FlowID: "greet"}},
		Insecure: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	peer, err := a2a.Discover(ctx, ts.URL, a2a.ClientOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ask := loom.NewFlow("ask", func(ctx *loom.Context, name string) (a2a.Outcome, error) {
		return a2a.Ask(ctx, "greet", peer, name)
	})
	local, err := loom.New(loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{ask}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = local.Close() }()
	id, err := local.Start(ctx, "ask", "Ada")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := local.WaitForCompletion(ctx, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(peer.ToolID())
	fmt.Println(outcomeText(res.Output))
	// Output:
	// a2a.send:greeter
	// completed: hello, Ada
}

// outcomeText is an outcome's state and text.
func outcomeText(raw []byte) string {
	var o a2a.Outcome
	if err := jsonUnmarshal(raw, &o); err != nil {
		return err.Error()
	}
	return string(o.State) + ": " + o.Text
}
