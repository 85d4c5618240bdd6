package auditchain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/auditchain"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store/memstore"
)

// The app chains its log under a key from its secret store, runs flows as
// usual, and anyone holding the key verifies a log later.
func ExampleWrap() {
	ctx := context.Background()
	key := []byte("an-hmac-key-of-32-random-bytes!!") // from your secret store
	events, err := auditchain.Wrap(memstore.NewEventStore(), auditchain.Options{Key: key})
	if err != nil {
		log.Fatal(err)
	}
	greet := loom.NewFlow("greet", func(c *loom.Context, name string) (string, error) { return "hello " + name, nil })
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{greet}})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	id, err := rt.Start(ctx, "greet", "ada", loom.WithExecutionID("greet-1"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, id); err != nil {
		log.Fatal(err)
	}
	r, err := auditchain.VerifyExecution(ctx, events, id, auditchain.Options{Key: key})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.ExecutionID, r.Length, "events, intact:", r.OK)
	// Output: greet-1 2 events, intact: true
}

// Verify checks envelopes already held (an export, a backup), read with
// their chain members: here one edited after it was chained.
func ExampleVerify() {
	ctx := context.Background()
	events, err := auditchain.Wrap(memstore.NewEventStore(), auditchain.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for seq, payload := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
		e := event.Envelope{ID: fmt.Sprintf("e%d", seq), ExecutionID: "x", Type: "NOTE", Sequence: int64(seq), Payload: json.RawMessage(payload)}
		if err := events.Append(ctx, "x", int64(seq), []event.Envelope{e}); err != nil {
			log.Fatal(err)
		}
	}
	stored, err := events.Inner().ReadFrom(ctx, "x", 0) // the stored bytes, members included
	if err != nil {
		log.Fatal(err)
	}
	stored[1].Payload = json.RawMessage(`{"n":20}`)
	r := auditchain.Verify(stored, auditchain.Options{})
	fmt.Println(r.OK, r.Sequence, r.Reason)
	// Output: false 1 edited
}

// With compaction, the archive is wrapped too, and the verify reads the
// archived events in place: the history verifies whole, with the same head.
func ExampleWrapArchive() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "loom-audit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(dir, "app.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	events, err := auditchain.Wrap(st.Events, auditchain.Options{})
	if err != nil {
		log.Fatal(err)
	}
	archive, err := auditchain.WrapArchive(st.Archive)
	if err != nil {
		log.Fatal(err)
	}
	count := loom.NewStep("count", func(_ context.Context, i int) (int, error) { return i + 1, nil })
	flow := loom.NewFlow("count", func(c *loom.Context, n int) (int, error) {
		total := 0
		for i := range n {
			v, err := loom.Run(c, count.Iter(i), i)
			if err != nil {
				return 0, err
			}
			total += v
		}
		return total, nil
	})
	rt, err := loom.New(loom.Config{Events: events, Snapshots: st.Snapshots, Archive: archive, Flows: []*loom.Flow{flow}})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	id, err := rt.Start(ctx, "count", 3, loom.WithExecutionID("count-1"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, id); err != nil {
		log.Fatal(err)
	}
	before, _ := auditchain.VerifyExecution(ctx, events, id, auditchain.Options{})
	res, err := rt.Compact(ctx, id, 4)
	if err != nil {
		log.Fatal(err)
	}
	after, err := auditchain.VerifyExecution(ctx, events, id, auditchain.Options{Archive: st.Archive})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("archived", res.Archived, "events; intact:", after.OK, "same head:", after.Head == before.Head)
	// Output: archived 4 events; intact: true same head: true
}
