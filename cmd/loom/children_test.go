package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// buildChildrenFixture writes a store with a parent "family" parked
// awaiting its child "family/kid", itself parked on a gate.
func buildChildrenFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "children.db")
	kid := loom.NewFlow("kid", func(c *loom.Context, _ struct{}) (int, error) { return loom.Suspend[int](c, "release") })
	family := loom.NewFlow("family", func(c *loom.Context, _ struct{}) (int, error) {
		k, err := loom.SpawnChild(c, "kid", "kid", nil)
		if err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	a, err := openAppWith(path, newStepClock("2026-01-05T09:00:00Z"), func(cfg *loom.Config, _ sqlite.Stores) {
		cfg.Flows = append(cfg.Flows, kid, family)
		cfg.Features.Children = true
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = func() error {
		if _, err := a.rt.Start(ctx, "family", nil, loom.WithExecutionID("family")); err != nil {
			return err
		}
		for _, id := range []string{"family", "family/kid"} {
			if _, err := a.rt.WaitForSuspend(ctx, id); err != nil {
				return err
			}
		}
		return nil
	}()
	if err := errors.Join(err, a.close()); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestChildLinksInStateLsAndInspector: loom state names a child's parent
// and a parent's children and what it awaits, loom ls --json carries the
// parent link, and the inspector shows both directions as links.
func TestChildLinksInStateLsAndInspector(t *testing.T) {
	bin, _ := setup(t)
	path := buildChildrenFixture(t)
	parent := mustLoom(t, bin, "state", "family", "--store", path)
	for _, want := range []string{"awaiting child family/kid", "kid: family/kid (kid)"} {
		if !strings.Contains(parent, want) {
			t.Fatalf("state of the parent does not say %q:\n%s", want, parent)
		}
	}
	if child := mustLoom(t, bin, "state", "family/kid", "--store", path); !strings.Contains(child, `Child of   family (as "kid")`) {
		t.Fatalf("state of the child does not name its parent:\n%s", child)
	}
	var page lsPage
	if err := json.Unmarshal([]byte(mustLoom(t, bin, "ls", "--json", "--store", path)), &page); err != nil {
		t.Fatal(err)
	}
	var parents []string
	for _, x := range page.Executions {
		var compact bytes.Buffer
		if len(x.Parent) > 0 {
			if err := json.Compact(&compact, x.Parent); err != nil {
				t.Fatal(err)
			}
		}
		parents = append(parents, x.ExecutionID+"←"+compact.String())
	}
	if !slices.Contains(parents, `family/kid←{"executionId":"family","name":"kid"}`) || !slices.Contains(parents, "family←") {
		t.Fatalf("ls --json parent links: %v", parents)
	}

	ctx := browser(t)
	srv := startLoom(t, bin, "inspect", "--store", path)
	m := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/) \(read-only`).FindStringSubmatch(srv.waitLine(t, "Inspecting ", 30*time.Second))
	if m == nil {
		t.Fatal("no loopback URL")
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	run("open the page", chromedp.Navigate(m[1]), chromedp.WaitVisible(`#executions li[data-id="family/kid"]`))
	if list := text(t, ctx, "#executions"); !strings.Contains(list, "child of family") {
		t.Fatalf("the list does not mark the child: %q", list)
	}
	run("select the parent", clickJS(`#executions li[data-id="family"] a`))
	waitJS(t, ctx, "the parent's children", `document.querySelector('#forks .children') !== null`, 20*time.Second)
	if forks := text(t, ctx, "#forks"); !strings.Contains(forks, "children: family/kid (kid)") {
		t.Fatalf("the parent's pane: %q", forks)
	}
	run("select the child", clickJS(`#executions li[data-id="family/kid"] a`))
	waitJS(t, ctx, "the child's parent", `document.querySelector('#forks .child-of') !== null`, 20*time.Second)
	if forks := text(t, ctx, "#forks"); !strings.Contains(forks, "child of family (as kid)") {
		t.Fatalf("the child's pane: %q", forks)
	}
}
