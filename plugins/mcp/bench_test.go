package mcp_test

// A durable MCP tool call against the same call through the bare SDK, on
// the same loopback server in one run, so their ratio is meaningful on a
// shared machine:
//
//	go test -run '^$' -bench . -benchtime=2s ./plugins/mcp/
//
// sdk is ClientSession.CallTool; step is one durable call in a running
// flow (STEP_STARTED, the pin check, the call, STEP_COMPLETED); flow is a
// whole execution per call (start, the step, completion). Both loom cases
// run on memstore and on SQLite (WAL, StepDurable; synchronous=FULL, the
// default, and NORMAL).

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/mcp"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func BenchmarkToolCall(b *testing.B) {
	w := newWorld()
	c := connect(b, mcp.ServerConfig{Name: "srv", URL: serveHTTP(b, newServer(w, nil), w)})
	echo := listed(b, c)["echo"]
	args := map[string]string{"text": "hello"}
	ctx := context.Background()

	b.Run("sdk", func(b *testing.B) {
		for b.Loop() {
			res, err := c.Session().CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"hello"}`)})
			if err != nil || res.IsError {
				b.Fatal(err)
			}
		}
	})
	stores := map[string]func(b *testing.B) store.Set{
		"memstore":      func(*testing.B) store.Set { return memstore.NewSet() },
		"sqlite":        func(b *testing.B) store.Set { return sqliteSet(b, sqlite.SyncFull) },
		"sqlite-normal": func(b *testing.B) store.Set { return sqliteSet(b, sqlite.SyncNormal) },
	}
	for _, name := range []string{"memstore", "sqlite", "sqlite-normal"} {
		b.Run("step/"+name, func(b *testing.B) {
			// One flow making b.N calls, each its own step.
			flow := loom.NewFlow("loop", func(ctx *loom.Context, n int) (int, error) {
				for i := range n {
					if _, err := mcp.Call(ctx, "echo#"+strconv.Itoa(i), echo, args); err != nil {
						return 0, err
					}
				}
				return n, nil
			})
			rt := newRuntime(b, stores[name](b), []*loom.Flow{flow}, nil, c)
			b.ResetTimer()
			id, err := rt.Start(ctx, "loop", b.N)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.WaitForCompletion(ctx, id); err != nil {
				b.Fatal(err)
			}
		})
		b.Run("flow/"+name, func(b *testing.B) {
			// One execution per call.
			flow := loom.NewFlow("one", func(ctx *loom.Context, _ struct{}) (string, error) {
				out, err := mcp.Call(ctx, "echo", echo, args)
				return string(out), err
			})
			rt := newRuntime(b, stores[name](b), []*loom.Flow{flow}, nil, c)
			for b.Loop() {
				id, err := rt.Start(ctx, "one", nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := rt.WaitForCompletion(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// sqliteSet is a SQLite file's event and snapshot stores.
func sqliteSet(b *testing.B, sync sqlite.Synchronous) store.Set {
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(b.TempDir(), "loom.db"), Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := st.Close(); err != nil {
			b.Error(err)
		}
	})
	return store.Set{Events: st.Events, Snapshots: st.Snapshots}
}
