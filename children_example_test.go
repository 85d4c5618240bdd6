package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store/memstore"
)

// A parent fans out to children and waits for all of them; the spawns and
// the results are recorded in its log, so a resume or a replay starts no
// child twice. A child that fails reaches the parent as a childFailed.
func ExampleSpawnChild() {
	quote := loom.NewFlow("quote", func(c *loom.Context, carrier string) (int, error) {
		if carrier == "slowpost" {
			return 0, errors.New("slowpost does not deliver there")
		}
		return len(carrier) * 100, nil
	})
	compare := loom.NewFlow("compare", func(c *loom.Context, _ struct{}) (string, error) {
		var kids []loom.Child
		for _, carrier := range []string{"post", "express", "slowpost"} {
			k, err := loom.SpawnChild(c, "quote", carrier, carrier)
			if err != nil {
				return "", err
			}
			kids = append(kids, k)
		}
		results, err := loom.AwaitChildren(c, kids)
		if err != nil {
			return "", err
		}
		out := ""
		for _, r := range results {
			if r.Status == "completed" {
				out += fmt.Sprintf("%s: %s\n", r.ChildID, r.Output)
			} else {
				out += fmt.Sprintf("%s: %s\n", r.ChildID, r.Status)
			}
		}
		_, err = loom.AwaitAll(c, kids)
		var failed *loom.ChildFailedError
		if errors.As(err, &failed) {
			out += "all or nothing: " + failed.Error()
		}
		return out, nil
	})
	rt, err := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{quote, compare},
		Features: loom.Features{Children: true}})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	ctx := context.Background()
	id, err := rt.Start(ctx, "compare", nil, loom.WithExecutionID("order-7"))
	if err != nil {
		panic(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		panic(err)
	}
	var out string
	if err := json.Unmarshal(res.Output, &out); err != nil {
		panic(err)
	}
	fmt.Print(out)
	// Output:
	// order-7/post: 400
	// order-7/express: 700
	// order-7/slowpost: failed
	// all or nothing: loom: child "order-7/slowpost" failed: slowpost does not deliver there
}
