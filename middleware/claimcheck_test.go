package middleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// countingContent counts a ContentStore's reads and writes.
type countingContent struct {
	store.ContentStore
	puts, gets atomic.Int64
}

func (c *countingContent) Put(ctx context.Context, data []byte) (string, error) {
	c.puts.Add(1)
	return c.ContentStore.Put(ctx, data)
}

func (c *countingContent) Get(ctx context.Context, ref string) ([]byte, error) {
	c.gets.Add(1)
	return c.ContentStore.Get(ctx, ref)
}

// bigOutput is a JSON output of n bytes.
func bigOutput(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`)
}

func claimRig(t *testing.T, cs store.ContentStore, out json.RawMessage, opts middleware.ClaimCheckOptions) (*rig, *counted, *outcome) {
	t.Helper()
	c := &counted{fn: func(*effect.Context, json.RawMessage) (json.RawMessage, error) { return out, nil }}
	flow, o := gatedFlow("scan", &loom.Task{ID: "scan", ToolID: "logs.scan"}, nil)
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{"logs.scan": c.Func}),
		Middleware: []effect.Middleware{middleware.ClaimCheck(cs, opts)}}, flow)
	return r, c, o
}

// Allow: an output at the cap is recorded inline; the store is not touched.
func TestClaimCheckKeepsOutputsAtTheCapInline(t *testing.T) {
	cs := &countingContent{ContentStore: memstore.NewContentStore()}
	out := bigOutput(middleware.DefaultMaxInlineBytes)
	r, _, o := claimRig(t, cs, out, middleware.ClaimCheckOptions{})
	r.start("scan", "in", nil)
	r.parked("in")
	if got, _ := o.get(); !bytes.Equal(got, out) || cs.puts.Load() != 0 {
		t.Fatalf("inline output changed (%d bytes) or stored (%d puts)", len(got), cs.puts.Load())
	}
}

// Trigger: an output over the cap is stored and the step records and
// returns the envelope; Resolve gives the bytes back. Replay: the envelope
// is served from the log with zero content reads, and the effect does not
// run again.
func TestClaimCheckStoresAnOverCapOutputAndReplayReadsNothing(t *testing.T) {
	cs := &countingContent{ContentStore: memstore.NewContentStore()}
	out := bigOutput(4000)
	r, c, o := claimRig(t, cs, out, middleware.ClaimCheckOptions{
		Digest: func(tool string, out json.RawMessage) json.RawMessage {
			return json.RawMessage(`{"tool":"` + tool + `","bytes":` + strconv.Itoa(len(out)) + `}`)
		},
	})
	r.start("scan", "big", nil)
	r.parked("big")
	ref := store.ContentRef(out)
	want := `{"$claim":{"ref":"` + ref + `","size":4000,"digest":{"tool":"logs.scan","bytes":4000}}}`
	got, err := o.get()
	if err != nil || string(got) != want {
		t.Fatalf("step returned %s %v\nwant %s", got, err, want)
	}
	if done := r.payloads("big", event.StepCompleted); len(done) != 1 || done[0] != `{"output":`+want+`,"stepId":"scan"}` {
		t.Fatalf("STEP_COMPLETED %v", done)
	}
	if strings.Contains(r.logText("big"), "xxxxxxxx") {
		t.Fatal("the claimed content reached the log")
	}
	claim, ok := middleware.ParseClaim(got)
	if !ok || claim.Ref != ref || claim.Size != 4000 {
		t.Fatalf("ParseClaim %+v %v", claim, ok)
	}
	res := replayKeepsRingFacts(t, r, "big", c, event.StepCompleted)
	if cs.gets.Load() != 0 || cs.puts.Load() != 1 {
		t.Fatalf("content reads %d, writes %d: replay must read nothing", cs.gets.Load(), cs.puts.Load())
	}
	if string(res.Output) != want {
		t.Fatalf("replayed output %s", res.Output)
	}
	content, err := middleware.Resolve(context.Background(), cs, res.Output)
	if err != nil || !bytes.Equal(content, out) {
		t.Fatalf("Resolve: %d bytes, %v", len(content), err)
	}
}

// ToolIDs limits the ring to the listed effects, by tool id.
func TestClaimCheckOnlyClaimsTheListedTools(t *testing.T) {
	cs := &countingContent{ContentStore: memstore.NewContentStore()}
	out := bigOutput(3000)
	r, _, o := claimRig(t, cs, out, middleware.ClaimCheckOptions{ToolIDs: []string{"other.tool"}})
	r.start("scan", "skip", nil)
	r.parked("skip")
	if got, _ := o.get(); !bytes.Equal(got, out) || cs.puts.Load() != 0 {
		t.Fatal("an unlisted tool's output was claimed")
	}
}

// Deny: a digest that is not small JSON, or a store that refuses the blob,
// fails the step with *ClaimCheckError; the output is not recorded.
func TestClaimCheckFailsTheStepWhenItCannotClaim(t *testing.T) {
	for name, tc := range map[string]struct {
		cs     store.ContentStore
		digest func(string, json.RawMessage) json.RawMessage
	}{
		"bad digest":  {memstore.NewContentStore(), func(string, json.RawMessage) json.RawMessage { return json.RawMessage(`{`) }},
		"big digest":  {memstore.NewContentStore(), func(_ string, out json.RawMessage) json.RawMessage { return out }},
		"store's cap": {memstore.NewContentStore(memstore.WithMaxContentBytes(2048)), nil},
	} {
		t.Run(name, func(t *testing.T) {
			r, _, o := claimRig(t, tc.cs, bigOutput(3000), middleware.ClaimCheckOptions{Digest: tc.digest})
			r.start("scan", "d", nil)
			r.parked("d")
			var ce *middleware.ClaimCheckError
			if _, err := o.get(); !errors.As(err, &ce) || middleware.DefaultRetryable(err) {
				t.Fatalf("step error %v", err)
			}
			if len(r.payloads("d", event.StepCompleted)) != 0 || strings.Contains(r.logText("d"), "xxxxxxxx") {
				t.Fatal("the unclaimed output was recorded")
			}
		})
	}
}

func TestParseClaimAcceptsOnlyTheEnvelope(t *testing.T) {
	ref := store.ContentRef([]byte("x"))
	for raw, want := range map[string]bool{
		`{"$claim":{"ref":"` + ref + `","size":1}}`:                true,
		` {"$claim":{"ref":"` + ref + `","size":1,"digest":[1]}} `: true,
		`{"$claim":{"ref":"` + ref + `","size":1},"other":1}`:      false,
		`{"$claim":{"ref":"` + ref + `","size":1,"extra":1}}`:      false,
		`{"$claim":{"ref":"sha256:nothex","size":1}}`:              false,
		`{"$claim":{"ref":"` + ref + `","size":-1}}`:               false,
		`{"$claim":null}`:   false,
		`"{\"$claim\":{}}"`: false,
		`{"$claim":{"ref":"` + ref + `","size":1}} {"trailing":true}`: false,
	} {
		if _, got := middleware.ParseClaim(json.RawMessage(raw)); got != want {
			t.Errorf("ParseClaim(%s) = %v, want %v", raw, got, want)
		}
	}
}

// Resolve checks what it read against the claim, and passes an inline
// value through.
func TestResolveChecksTheClaimAndPassesInlineValues(t *testing.T) {
	ctx := context.Background()
	cs := memstore.NewContentStore()
	ref, err := cs.Put(ctx, []byte(`"abc"`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := middleware.Resolve(ctx, cs, json.RawMessage(`{"inline":true}`)); err != nil || string(got) != `{"inline":true}` {
		t.Fatalf("inline: %s %v", got, err)
	}
	wrongSize := json.RawMessage(`{"$claim":{"ref":"` + ref + `","size":4}}`)
	if _, err := middleware.Resolve(ctx, cs, wrongSize); !errors.Is(err, store.ErrContentCorrupt) {
		t.Fatalf("wrong size: %v", err)
	}
	missing := json.RawMessage(`{"$claim":{"ref":"` + store.ContentRef([]byte("gone")) + `","size":4}}`)
	if _, err := middleware.Resolve(ctx, cs, missing); !errors.Is(err, store.ErrContentNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

// The claim check over the embedded store's ContentStore: the blob is
// durable in the SQLite file before the step records its envelope, the
// replay reads nothing, and the content resolves after the file is
// reopened.
func TestClaimCheckOverSQLiteContentStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "content.db")
	db, err := sqlite.OpenContentStore(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cs := &countingContent{ContentStore: db}
	out := bigOutput(64 << 10)
	r, c, o := claimRig(t, cs, out, middleware.ClaimCheckOptions{ToolIDs: []string{"logs.scan"}})
	r.start("scan", "sq", nil)
	r.parked("sq")
	env, err := o.get()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := middleware.ParseClaim(env); !ok {
		t.Fatalf("step returned %.80s…, not an envelope", env)
	}
	replayKeepsRingFacts(t, r, "sq", c, event.StepCompleted)
	if cs.gets.Load() != 0 || cs.puts.Load() != 1 {
		t.Fatalf("content reads %d, writes %d", cs.gets.Load(), cs.puts.Load())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := sqlite.OpenContentStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	content, err := middleware.Resolve(context.Background(), reopened, env)
	if err != nil || !bytes.Equal(content, out) {
		t.Fatalf("Resolve after reopening: %d bytes, %v", len(content), err)
	}
}
