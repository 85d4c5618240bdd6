package a2a_test

import (
	"context"
	"errors"
	"testing"
	"time"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/loom-kernel/loom"
)

// A task that does not settle within SettleTimeout is working, and
// tasks/get reads it on; a failed flow is a failed task.
func TestTaskStatesFollowTheExecution(t *testing.T) {
	release := make(chan struct{})
	slow := loom.NewFlow("slow", func(ctx *loom.Context, in string) (string, error) {
		_, err := ctx.Run("wait", func(c context.Context) (any, error) {
			select {
			case <-release:
				return "ok", nil
			case <-c.Done():
				return nil, c.Err()
			}
		})
		return "done " + in, err
	})
	broken := loom.NewFlow("broken", func(ctx *loom.Context, in string) (string, error) {
		return "", errors.New("internal detail the caller must not see")
	})
	t.Run("working", func(t *testing.T) {
		p := publishFlows(t, time.Nanosecond, slow, broken)
		ctx := testContext(t)
		c := sdkClient(t, p.url+"/agents/slow", "alice-token")
		task, err := sendText(ctx, c, "", protocol.NewTextPart("x"))
		if err != nil {
			t.Fatal(err)
		}
		if task.Status.State != protocol.TaskStateWorking {
			t.Fatalf("state %s", task.Status.State)
		}
		close(release)
		if _, err := p.rt.WaitForCompletion(ctx, string(task.ID)); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetTask(ctx, &protocol.GetTaskRequest{ID: task.ID})
		if err != nil || got.Status.State != protocol.TaskStateCompleted || artifactText(got) != "done x" {
			t.Fatalf("GetTask = %+v, %v", got, err)
		}
	})
	t.Run("failed", func(t *testing.T) {
		p := publishFlows(t, 0, slow, broken)
		ctx := testContext(t)
		c := sdkClient(t, p.url+"/agents/broken", "alice-token")
		task, err := sendText(ctx, c, "", protocol.NewTextPart("x"))
		if err != nil {
			t.Fatal(err)
		}
		if task.Status.State != protocol.TaskStateFailed || task.Status.Message == nil ||
			task.Status.Message.Parts[0].Text() != "the flow failed" {
			t.Fatalf("task %+v", task)
		}
	})
}
