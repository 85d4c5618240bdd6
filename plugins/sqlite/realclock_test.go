package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// The one real-clock test of durable time (T1): a flow sleeps 1 second, the
// process that parked it exits, and a new process — with the real clock and
// the background poller — wakes it exactly once, no earlier than recorded.

const napID = "nap-1"

func napFlow() *loom.Flow {
	return loom.NewFlow("nap", func(ctx *loom.Context, _ struct{}) (string, error) {
		if err := ctx.Sleep(time.Second); err != nil {
			return "", err
		}
		return "rested", nil
	})
}

func openNapRuntime(t testing.TB, path string) (*loom.Runtime, sqlite.Stores) {
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Events: st.Events, Snapshots: st.Snapshots, Timers: st.Timers,
		TimerPoll: 50 * time.Millisecond, Flows: []*loom.Flow{napFlow()}})
	if err != nil {
		t.Fatal(err)
	}
	return rt, st
}

// TestRealClockHelper is the child process; it does nothing unless the
// parent test runs it.
func TestRealClockHelper(t *testing.T) {
	path, phase := os.Getenv("LOOM_NAP_DB"), os.Getenv("LOOM_NAP_PHASE")
	if path == "" {
		return
	}
	rt, st := openNapRuntime(t, path)
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch phase {
	case "start":
		if _, err := rt.Start(ctx, "nap", nil, loom.WithExecutionID(napID)); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForSuspend(ctx, napID); err != nil {
			t.Fatal(err)
		}
	case "wake":
		res, err := rt.WaitForCompletion(ctx, napID)
		if err != nil || string(res.Output) != `"rested"` {
			t.Fatalf("%s %v", res.Output, err)
		}
	}
}

func runHelper(t *testing.T, path, phase string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRealClockHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOOM_NAP_DB="+path, "LOOM_NAP_PHASE="+phase, "GORACE=atexit_sleep_ms=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s process: %v\n%s", phase, err, out)
	}
}

func TestT1_RealClockSleepAcrossAProcessRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nap.db")
	runHelper(t, path, "start") // parks, exits
	runHelper(t, path, "wake")  // a new process: the poller wakes it

	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := store.Read(context.Background(), st.Events, napID)
	if err != nil {
		t.Fatal(err)
	}
	var wakeAt, firedAt int64
	fired := 0
	for _, e := range evs {
		switch e.Type {
		case event.ExecutionSuspended:
			fmt.Sscanf(string(e.Payload), `{"on":"__loom_sleep__","wakeAt":%d}`, &wakeAt)
		case event.TimerFired:
			fired++
			firedAt = e.Timestamp
		}
	}
	if fired != 1 || wakeAt == 0 || firedAt < wakeAt {
		t.Fatalf("TIMER_FIRED %d times, at %d for wakeAt %d", fired, firedAt, wakeAt)
	}
	if due, _ := st.Timers.Due(context.Background(), time.Now().Add(time.Hour).UnixMilli(), 10); len(due) != 0 {
		t.Fatalf("timers left: %v", due)
	}
}
