package postgres

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// waitGuard bounds every channel wait of these tests. It is a hang guard,
// never pacing: a passing run does not wait for it.
const waitGuard = 20 * time.Second

// onlyNotify turns the re-read ticker off, so a delivery in these tests can
// only come from a NOTIFY or a (re)connect of the LISTEN connection.
func onlyNotify(o *Options) { o.RereadInterval = -1 }

// receive requires the next events of sn to be exactly want, in order.
func receive(t *testing.T, sn *store.Subscription, want []event.Envelope) {
	t.Helper()
	guard := time.NewTimer(waitGuard)
	defer guard.Stop()
	for _, w := range want {
		select {
		case e, ok := <-sn.Events():
			if !ok {
				t.Fatalf("subscription ended (Err %v) before sequence %d", sn.Err(), w.Sequence)
			}
			if e.Sequence != w.Sequence || e.ID != w.ID {
				t.Fatalf("subscription delivered %q at %d, want %q at %d", e.ID, e.Sequence, w.ID, w.Sequence)
			}
		case <-guard.C:
			t.Fatalf("no event at sequence %d within %v", w.Sequence, waitGuard)
		}
	}
}

// awaitListens waits until the listener of db has taken effect n times in
// all (its first LISTEN, then each reconnect).
func awaitListens(t *testing.T, db *DB, n int64) {
	t.Helper()
	guard := time.NewTimer(waitGuard)
	defer guard.Stop()
	for {
		got, next := db.listen.listened()
		if got >= n {
			return
		}
		select {
		case <-next:
		case <-guard.C:
			t.Fatalf("the LISTEN connection took effect %d times within %v, want %d", got, waitGuard, n)
		}
	}
}

// subscribe subscribes to exec from 0 on db and closes the subscription at
// cleanup.
func subscribe(t *testing.T, db *DB, exec string) *store.Subscription {
	t.Helper()
	sn, err := db.EventStore().Subscribe(context.Background(), exec, 0)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	t.Cleanup(sn.Close)
	return sn
}

// An append through one DB wakes a subscriber of another DB (another pool,
// as another node would have) through NOTIFY: this is what SQLite cannot do.
func TestSubscribeWokenByAnotherDB(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	reader, writer := openDB(t, schema, onlyNotify), openDB(t, schema)
	const exec = "exec-x"
	sn := subscribe(t, reader, exec)
	awaitListens(t, reader, 1)
	all := batch(exec, 0, 4)
	mustAppend(t, writer.EventStore(), exec, 0, all[:1])
	receive(t, sn, all[:1])
	mustAppend(t, writer.EventStore(), exec, 1, all[1:])
	receive(t, sn, all[1:])
	// CopyPrefix notifies too.
	fork := subscribe(t, reader, "exec-fork")
	if err := writer.EventStore().CopyPrefix(context.Background(), exec, "exec-fork", 1); err != nil {
		t.Fatal(err)
	}
	receive(t, fork, all[:2]) // a fork copies the events as they are, ids included
}

// A subscriber whose LISTEN connection is killed (pg_terminate_backend)
// misses the notifications sent while it is down, yet still receives every
// event: the reconnect wakes it to re-read the log, and later appends are
// notified on the new connection. The re-read ticker is off, so nothing
// else can deliver.
func TestSubscribeSurvivesListenConnectionKill(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	reader := openDB(t, schema, onlyNotify, func(o *Options) {
		o.ListenReconnectDelay = 10 * time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil)) // the kill is logged
	})
	writer := openDB(t, schema)
	const exec = "exec-k"
	all := batch(exec, 0, 6)
	sn := subscribe(t, reader, exec)
	awaitListens(t, reader, 1)
	mustAppend(t, writer.EventStore(), exec, 0, all[:2])
	receive(t, sn, all[:2])

	pid := reader.listen.pid.Load()
	if adminQueryInt(t, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND query ILIKE 'listen%'`, int64(pid)) != 1 {
		t.Fatalf("backend %d is not the LISTEN connection", pid)
	}
	if adminQueryInt(t, `SELECT pg_terminate_backend($1)::int`, int64(pid)) != 1 {
		t.Fatalf("pg_terminate_backend(%d) failed", pid)
	}
	// Appended while the listener is down or reconnecting: its NOTIFY may
	// reach no one.
	mustAppend(t, writer.EventStore(), exec, 2, all[2:4])
	awaitListens(t, reader, 2)
	receive(t, sn, all[2:4])
	if reader.listen.pid.Load() == pid {
		t.Fatal("the listener did not open a new connection")
	}
	mustAppend(t, writer.EventStore(), exec, 4, all[4:])
	receive(t, sn, all[4:])
}

// helperEnv names the variables that make TestHelperProcessAppends append.
const (
	helperSchemaEnv = "LOOM_PG_HELPER_SCHEMA"
	helperExecEnv   = "LOOM_PG_HELPER_EXEC"
)

// An append by another OS process wakes this process's subscriber: the
// test binary runs itself as the writer (TestHelperProcessAppends).
func TestSubscribeWokenByAnotherProcess(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	reader := openDB(t, schema, onlyNotify)
	const execID = "exec-p"
	sn := subscribe(t, reader, execID)
	awaitListens(t, reader, 1) // so only a NOTIFY can deliver what follows
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessAppends$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperSchemaEnv+"="+schema, helperExecEnv+"="+execID)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writer process: %v\n%s", err, out)
	}
	receive(t, sn, batch(execID, 0, 3))
}

// TestHelperProcessAppends is the writer process of
// TestSubscribeWokenByAnotherProcess; run directly, without its variables,
// it does nothing.
func TestHelperProcessAppends(t *testing.T) {
	schema, execID := os.Getenv(helperSchemaEnv), os.Getenv(helperExecEnv)
	if schema == "" {
		return
	}
	db, err := Open(context.Background(), testOptions(t, schema))
	if err != nil {
		t.Fatal(err)
	}
	s := db.EventStore()
	for seq := range int64(3) {
		if err := s.Append(context.Background(), execID, seq, batch(execID, seq, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
