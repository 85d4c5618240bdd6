package crypto_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// The benchmarks run the plain store and the sealed one in turn inside
// every op, so drift (page cache, thermal) hits both alike, and report the
// ratio sealed/plain (target ≤ 1.3).

const benchFlowSteps = 10

func benchSQLite(b *testing.B) *sqlite.DB {
	db, err := sqlite.Open(filepath.Join(b.TempDir(), "loom.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	})
	return db
}

func benchSealed(b *testing.B, db *sqlite.DB) (*crypto.EventStore, store.SnapshotStore) {
	keys := openKeys(b, b.TempDir())
	events := wrapEvents(b, db.EventStore(), keys, crypto.EventStoreOptions{Subject: crypto.SubjectFromInput("user")})
	snaps, err := crypto.NewSnapshotStore(db.SnapshotStore(), keys, events, nil)
	if err != nil {
		b.Fatal(err)
	}
	return events, snaps
}

func benchFlow() *loom.Flow {
	step := loom.NewStep("work", func(ctx context.Context, in doc) (doc, error) {
		return doc{"result": "value of " + fmt.Sprint(in["i"]), "user": in["user"]}, nil
	})
	return loom.NewFlow("ten-steps", func(c *loom.Context, in doc) (doc, error) {
		out := in
		for i := 1; i <= benchFlowSteps; i++ {
			r, err := loom.Run(c, step.Iter(i), doc{"i": i, "user": in["user"], "note": in["note"]})
			if err != nil {
				return nil, err
			}
			out = r
		}
		return out, nil
	})
}

func benchRuntime(b *testing.B, events store.EventStore, snaps store.SnapshotStore) *loom.Runtime {
	rt, err := loom.New(loom.Config{Events: events, Snapshots: snaps, Flows: []*loom.Flow{benchFlow()},
		Recovery: loom.Recovery{Disabled: true}, Durability: loom.WriteBehind, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := rt.Close(); err != nil {
			b.Error(err)
		}
	})
	return rt
}

func BenchmarkTenStepFlowSealedVsPlainSQLite(b *testing.B) {
	plainDB, sealedDB := benchSQLite(b), benchSQLite(b)
	events, snaps := benchSealed(b, sealedDB)
	rts := []*loom.Runtime{benchRuntime(b, plainDB.EventStore(), plainDB.SnapshotStore()), benchRuntime(b, events, snaps)}
	in := doc{"user": "user-1", "note": strings.Repeat("n", 256)}
	ctx := context.Background()
	spent := make([]time.Duration, 2)
	n := 0
	for b.Loop() {
		for k := range rts {
			i := (n + k) % 2
			start := time.Now()
			id, err := rts[i].Start(ctx, "ten-steps", in)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rts[i].WaitForCompletion(ctx, id); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(start)
		}
		n++
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(n), "plain-ns/flow")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(n), "sealed-ns/flow")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "sealed/plain")
}

func BenchmarkAppendSealedVsPlainSQLite(b *testing.B) {
	plainDB, sealedDB := benchSQLite(b), benchSQLite(b)
	sealed, _ := benchSealed(b, sealedDB)
	stores := []store.EventStore{plainDB.EventStore(), sealed}
	ctx := context.Background()
	body := strconv.Quote(strings.Repeat("x", 1024))
	spent := make([]time.Duration, 2)
	n := 0
	for b.Loop() {
		for k := range stores {
			i := (n + k) % 2
			exec := "bench-" + strconv.Itoa(n)
			batch := []event.Envelope{
				{ID: exec + "-0", WorkflowID: "wf", ExecutionID: exec, Type: event.ExecutionStarted, Sequence: 0, Timestamp: 1,
					Payload: json.RawMessage(`{"input":{"user":"user-1","body":` + body + `}}`)},
				{ID: exec + "-1", WorkflowID: "wf", ExecutionID: exec, Type: event.StepStarted, Sequence: 1, Timestamp: 2,
					Payload: json.RawMessage(`{"stepId":"s","attempt":1,"input":` + body + `}`)},
				{ID: exec + "-2", WorkflowID: "wf", ExecutionID: exec, Type: event.StepCompleted, Sequence: 2, Timestamp: 3,
					Payload: json.RawMessage(`{"stepId":"s","output":` + body + `}`)},
			}
			start := time.Now()
			if err := stores[i].Append(ctx, exec, 0, batch[:1]); err != nil {
				b.Fatal(err)
			}
			if err := stores[i].Append(ctx, exec, 1, batch[1:]); err != nil {
				b.Fatal(err)
			}
			if _, err := stores[i].ReadFrom(ctx, exec, 0); err != nil {
				b.Fatal(err)
			}
			spent[i] += time.Since(start)
		}
		n++
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(n), "plain-ns/op")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(n), "sealed-ns/op")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "sealed/plain")
}
