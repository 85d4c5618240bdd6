package loom_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom"
)

// A waiter in one process follows an execution another process drives over
// the same SQLite file: it hears the park and the end, never a wait that
// does not end.
func TestAWaiterFollowsAnotherProcessOverSQLite(t *testing.T) {
	flow := func() *loom.Flow {
		return loom.NewFlow("ask", func(ctx *loom.Context, _ struct{}) (bool, error) {
			return loom.Suspend[bool](ctx, "answer")
		})
	}
	path := filepath.Join(t.TempDir(), "loom.db")
	driver := openSQLiteNode(t, path, loom.Config{}, flow())
	watcher := openSQLiteNode(t, path, loom.Config{}, flow())
	ctx := testCtx(t)
	id, err := driver.rt.Start(ctx, "ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := watcher.rt.WaitForSuspend(ctx, id)
	if err != nil || st.Variables.SuspendedOn == nil || st.Variables.SuspendedOn.On != "answer" {
		t.Fatalf("the watcher saw %+v: %v", st.Variables.SuspendedOn, err)
	}
	done := make(chan error, 1)
	var res loom.Result
	go func() {
		var err error
		res, err = watcher.rt.WaitForCompletion(ctx, id)
		done <- err
	}()
	if err := driver.rt.Resume(ctx, id, loom.ResumeEvent{EventType: "answer", Payload: json.RawMessage("true")}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || string(res.Output) != "true" {
		t.Fatalf("the watcher's wait: %s %v", res.Output, err)
	}
}
