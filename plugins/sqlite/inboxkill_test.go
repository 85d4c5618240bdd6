package sqlite_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// The inbox across a killed process: the receiver's process parks waiting
// for messages, two messages are sent (durable) and the process is killed
// with SIGKILL before it consumes them; a new process recovers the
// execution and consumes both, in order, exactly once.

const inboxID = "inbox-1"

func inboxFlow() *loom.Flow {
	return loom.NewFlow("collect", func(ctx *loom.Context, _ struct{}) ([]int, error) {
		var got []int
		for range 2 {
			v, err := loom.Receive[int](ctx, "orders")
			if err != nil {
				return nil, err
			}
			got = append(got, v)
		}
		return got, nil
	})
}

func openInbox(t testing.TB, path string, flows ...*loom.Flow) (*loom.Runtime, sqlite.Stores) {
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Events: st.Events, Snapshots: st.Snapshots, Flows: flows, Recovery: loom.Recovery{Disabled: true},
		Features: loom.Features{Inbox: true}})
	if err != nil {
		t.Fatal(err)
	}
	return rt, st
}

// TestInboxKillHelper is the receiver's process; it does nothing unless the
// parent test runs it.
func TestInboxKillHelper(t *testing.T) {
	path, phase := os.Getenv("LOOM_INBOX_DB"), os.Getenv("LOOM_INBOX_PHASE")
	if path == "" {
		return
	}
	rt, st := openInbox(t, path, inboxFlow())
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	switch phase {
	case "receive": // park, say so, and wait to be killed
		if _, err := rt.Start(ctx, "collect", nil, loom.WithExecutionID(inboxID)); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForSuspend(ctx, inboxID); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("parked\n")
		<-ctx.Done()
	case "recover":
		if _, err := rt.Recover(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := rt.WaitForCompletion(ctx, inboxID)
		if err != nil || string(res.Output) != "[1,2]" {
			t.Fatalf("%s %v", res.Output, err)
		}
	}
}

func TestInboxMessagesSurviveAKilledReceiver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.db")
	helper := func(phase string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInboxKillHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "LOOM_INBOX_DB="+path, "LOOM_INBOX_PHASE="+phase, "GORACE=atexit_sleep_ms=0")
		return cmd
	}
	receiver := helper("receive")
	out, err := receiver.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := receiver.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "parked" {
		_ = receiver.Process.Kill()
		t.Fatalf("the receiver did not park: %q %v", line, err)
	}
	// The sender's process does not run the flow: the messages are durable,
	// nobody here consumes them.
	sender, st := openInbox(t, path)
	for _, v := range []int{1, 2} {
		if err := sender.Send(context.Background(), inboxID, "orders", v); err != nil {
			t.Fatal(err)
		}
	}
	sender.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := receiver.Process.Kill(); err != nil { // SIGKILL before it consumes
		t.Fatal(err)
	}
	_ = receiver.Wait()

	if out, err := helper("recover").CombinedOutput(); err != nil {
		t.Fatalf("recovering process: %v\n%s", err, out)
	}
	st, err = sqlite.Storage(sqlite.StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := store.Read(context.Background(), st.Events, inboxID)
	if err != nil {
		t.Fatal(err)
	}
	consumed := 0
	for _, e := range evs {
		if e.Type == event.MessageConsumed {
			consumed++
		}
	}
	if consumed != 2 {
		t.Fatalf("MESSAGE_CONSUMED %d times, want exactly 2", consumed)
	}
}
