// Command hello is Loom's hello world: a flow of two steps and a human gate,
// crashed halfway by one process and finished by another.
//
//	go run ./examples/hello [FILE.db]
//
// The program runs itself twice on one SQLite file (a new one in a temporary
// directory, removed at the end, unless you name one that does not exist
// yet). The first process starts the flow: step "greet" completes, then step
// "shout" kills the process mid-step (os.Exit: no clean-up, like a crash).
// The second process opens the same file and only waits: the runtime's
// automatic recovery re-drives the crashed execution from its log — "greet"
// is served from the log, "shout" runs again — until it parks at the
// "approve" gate, which the second process answers.
//
// Recovery takes a crashed process's execution over once its lease has
// expired (or, if it never took one, once its log has been quiet for a lease
// TTL). LeaseTTL is 1s here instead of the default 30s, so the demo ends
// within a couple of seconds. StepDurable makes each step's outcome durable
// before the flow goes on, so no completed step is lost to the crash.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

var (
	first = len(os.Args) == 3 // "hello FILE.db crash": the first process
	ran   []string            // the steps this process ran
)

var greet = loom.NewStep("greet", func(ctx context.Context, name string) (string, error) {
	ran = append(ran, "greet")
	say("step greet ran")
	return "hello, " + name, nil
})

var shout = loom.NewStep("shout", func(ctx context.Context, s string) (string, error) {
	ran = append(ran, "shout")
	say("step shout ran")
	if first {
		os.Exit(3) // a crash in the middle of a step
	}
	return strings.ToUpper(s) + "!", nil
})

var hello = loom.NewFlow("hello", func(ctx *loom.Context, name string) (string, error) {
	s, err := loom.Run(ctx, greet, name) // durable: served from the log once recorded
	if err == nil {
		s, err = loom.Run(ctx, shout, s)
	}
	if err != nil {
		return "", err
	}
	if ok, err := loom.Suspend[bool](ctx, "approve"); err != nil || !ok { // parks until answered
		return "not approved", err
	}
	return s, nil
})

func main() {
	if len(os.Args) == 1 { // no file named: use a new temporary one
		dir, err := os.MkdirTemp("", "loom-hello-")
		check(err)
		defer os.RemoveAll(dir)
		os.Args = append(os.Args, filepath.Join(dir, "hello.db"))
	}
	ctx, db, id := context.Background(), os.Args[1], "hello-1"
	if !first { // run the first process, which crashes, then take over
		cmd := exec.Command(os.Args[0], db, "crash")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		say("the first process died (%v) and left %s running", cmd.Run(), id)
	}
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: db})
	check(err)
	rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{hello}, LeaseTTL: time.Second, Durability: loom.StepDurable})
	check(err)
	if first {
		say("starting %s", id)
		_, err = loom.StartFlow[string, string](ctx, rt, hello, "world", loom.WithExecutionID(id))
		check(err)
		_, err = loom.Await[string](ctx, rt, id) // never returns: shout exits the process
		check(fmt.Errorf("the first process was meant to crash: %v", err))
	}
	_, err = rt.WaitForSuspend(ctx, id) // automatic recovery re-drives it up to the gate
	check(err)
	say("recovered %s up to gate approve; answering true", id)
	check(rt.Resume(ctx, id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage("true")}))
	out, err := loom.Await[string](ctx, rt, id)
	check(err)
	say("%s completed with %q; this process ran %v, the rest was served from the log", id, out, ran)
	check(rt.Close())
	check(st.Close()) // commits what is queued: an error here is a lost write
}

// say prints one line of the transcript.
func say(format string, args ...any) {
	fmt.Printf("process %d: "+format+"\n", append([]any{os.Getpid()}, args...)...)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
}
