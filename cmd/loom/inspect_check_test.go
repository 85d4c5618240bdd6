package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/wire"
)

// Divergence and code pins in the execution view (issue 20, point 2), in
// headless Chromium: executions recorded by one release of an app, then
// the next release serving the wire ABI over the same SQLite file, and
// `loom inspect --app` asking it whether each log replays under its code.

// scoreFlow is "ops.score": fetch, then the step named second, then the
// gate "ok"; pinnedFlow is "ops.pinned", one step under code pin pin.
func scoreFlow(second string) *loom.Flow {
	step := func(id string) *loom.Step[int, int] {
		return loom.NewStep(id, func(_ context.Context, n int) (int, error) { return n + 1, nil })
	}
	return loom.NewFlow("ops.score", func(ctx *loom.Context, n int) (int, error) {
		for _, id := range []string{"fetch", second} {
			var err error
			if n, err = loom.Run(ctx, step(id), n); err != nil {
				return 0, err
			}
		}
		_, err := ctx.Suspend("ok")
		return n, err
	})
}

func pinnedFlow(pin string) *loom.Flow {
	check := loom.NewStep("check", func(_ context.Context, n int) (int, error) { return n, nil })
	return loom.NewFlow("ops.pinned", func(ctx *loom.Context, n int) (int, error) {
		if _, err := loom.Run(ctx, check, n); err != nil {
			return 0, err
		}
		_, err := ctx.Suspend("ok")
		return n, err
	}, loom.WithCodeFingerprint(pin))
}

// firstRelease records, over the SQLite file at path, sc-1 and sc-2 of
// ops.score (fetch, score) and pin-1 of ops.pinned under pin v1, each
// parked on its gate, and stops.
func firstRelease(t *testing.T, path string) {
	t.Helper()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path, Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{scoreFlow("score"), pinnedFlow("v1")}, StickyParks: -1})
	if err != nil {
		t.Fatal(errors.Join(err, st.Close()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, x := range [][2]string{{"sc-1", "ops.score"}, {"sc-2", "ops.score"}, {"pin-1", "ops.pinned"}} {
		if _, err := rt.Start(ctx, x[1], 1, loom.WithExecutionID(x[0])); err != nil {
			t.Fatal(err)
		}
		if st, err := rt.WaitForSettled(ctx, x[0]); err != nil || st.Status != fold.StatusSuspended {
			t.Fatalf("%s: %v %v", x[0], st.Status, err)
		}
	}
	if err := errors.Join(rt.Close(), st.Close()); err != nil {
		t.Fatal(err)
	}
}

// nextRelease is the next release over the same file — score renamed
// rank, ops.pinned under pin v2 — serving its wire ABI on loopback.
func nextRelease(t *testing.T, path string) (*loom.Runtime, string) {
	t.Helper()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path, Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{scoreFlow("rank"), pinnedFlow("v2")}, StickyParks: -1,
		Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(errors.Join(err, st.Close()))
	}
	t.Cleanup(func() {
		if err := errors.Join(rt.Close(), st.Close()); err != nil {
			t.Error(err)
		}
	})
	h, err := wire.Handler(rt, wire.Options{Events: st.Events, Authenticate: wire.BearerToken(actionsAppToken, "inspector")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return rt, srv.URL
}

// TestInspectorMarksDivergenceInBrowser: the Replay panel of each
// execution says what the app's code would do with its log — sc-1 parts
// from it where the log has step score and the code runs rank, the row at
// that sequence marked; pin-1 was recorded under another code pin, both
// shown — and sc-2, which the next release re-drove when it was answered,
// is parked on __loom_diverged__: its row and the panel say so with the
// recorded reason, also in a read-only inspector that cannot ask the app.
// No check appends anything.
func TestInspectorMarksDivergenceInBrowser(t *testing.T) {
	bin, _ := setup(t)
	path := filepath.Join(t.TempDir(), "release.db")
	firstRelease(t, path)
	rt, appURL := nextRelease(t, path)
	ctx0, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Resume(ctx0, "sc-2", loom.ResumeEvent{EventType: "ok"}); err != nil {
		t.Fatal(err)
	}
	if st, err := rt.WaitForSettled(ctx0, "sc-2"); err != nil || st.Variables.SuspendedOn == nil || st.Variables.SuspendedOn.On != fold.GateDiverged {
		t.Fatalf("sc-2 after the answer: %+v %v", st.Variables.SuspendedOn, err)
	}
	before := map[string]int{}
	for _, id := range []string{"sc-1", "sc-2", "pin-1"} {
		before[id] = len(readLog(t, path, id))
	}
	renamed := firstEvent(t, readLog(t, path, "sc-1"), event.StepStarted, "score").Sequence

	srv := startLoom(t, bin, "inspect", "--store", path, "--app", appURL, "--app-token", actionsAppToken)
	_, login := inspectorLoginURL(t, srv)
	ctx := browser(t)
	run := runIn(t, ctx)
	run("log in", chromedp.Navigate(login), chromedp.WaitVisible(`#executions li[data-id="sc-1"]`))

	run("open sc-1", clickJS(`#executions li[data-id="sc-1"] a`))
	waitJS(t, ctx, "sc-1's verdict", replayShows("sc-1", "diverged"), 20*time.Second)
	if got := innerText(t, ctx, "#replay .replay-where"); got != "at #"+itoa64(renamed)+`: the log has step "score", the code step "rank"` {
		t.Fatalf("sc-1's verdict says %q", got)
	}
	waitJS(t, ctx, "the row marked", `(li => li && li.dataset.seq === '`+itoa64(renamed)+`' && li.querySelector('.diverges-badge') !== null)`+
		`(document.querySelector('#timeline li.diverges-here'))`, 10*time.Second)
	if n := countJS(t, ctx, "#timeline li.diverges-here"); n != 1 {
		t.Fatalf("%d rows marked, want 1", n)
	}
	screenshot(t, ctx, "inspector-check-diverged")

	run("open pin-1", clickJS(`#executions li[data-id="pin-1"] a`))
	waitJS(t, ctx, "pin-1's verdict", replayShows("pin-1", "code-pin-mismatch"), 20*time.Second)
	if got := innerText(t, ctx, "#replay .replay-pins"); got != "recorded pin v1, the app's flow v2" {
		t.Fatalf("pin-1's pins: %q", got)
	}
	if n := countJS(t, ctx, "#timeline li.diverges-here"); n != 0 {
		t.Fatalf("pin-1 has %d rows marked: a pin mismatch with compatible steps names no sequence", n)
	}

	run("open sc-2", clickJS(`#executions li[data-id="sc-2"] a`))
	waitJS(t, ctx, "sc-2's diverged park and verdict", replayShows("sc-2", "parked-diverged")+` && `+replayShows("sc-2", "diverged")+
		` && document.querySelector('#timeline li.k-diverged') !== null`, 20*time.Second)
	if got := innerText(t, ctx, `#replay [data-verdict="parked-diverged"] .reason`); !strings.Contains(got, `"rank"`) || !strings.Contains(got, `"score"`) {
		t.Fatalf("sc-2's reason: %q", got)
	}

	// A read-only inspector marks the diverged park from the log alone.
	ro := startLoom(t, bin, "inspect", "--store", path)
	roURL := inspectorURL(t, ro)
	other := browser(t)
	runIn(t, other)("open sc-2 read-only", chromedp.Navigate(roURL+"#/x/sc-2"))
	waitJS(t, other, "sc-2's diverged park, read-only", replayShows("sc-2", "parked-diverged")+` && document.querySelector('#timeline li.k-diverged') !== null`, 20*time.Second)
	if got := innerText(t, other, "#replay"); strings.Contains(got, "check again") {
		t.Fatalf("a read-only inspector offers a check: %q", got)
	}
	runIn(t, other)("open sc-1 read-only", chromedp.Navigate(roURL+"#/x/sc-1"))
	waitJS(t, other, "the not-checked note", replayShows("sc-1", "")+` && document.querySelector('#replay').innerText.includes('Not checked against the app')`, 20*time.Second)

	for id, n := range before {
		if got := len(readLog(t, path, id)); got != n {
			t.Fatalf("%s: %d events after the checks, was %d", id, got, n)
		}
	}
	for _, s := range []*background{srv, ro} {
		if err := s.interrupt(t); err != nil {
			t.Fatal(err)
		}
	}
}

// replayShows is true once the Replay panel is on execution id with
// verdict (any, when "").
func replayShows(id, verdict string) string {
	v := "true"
	if verdict != "" {
		v = `p.querySelector('[data-verdict="` + verdict + `"]') !== null`
	}
	return `(p => p !== null && p.dataset.execution === ` + js(id) + ` && ` + v + `)(document.querySelector('#replay'))`
}

// innerText reads the text of sel in one evaluation, so a redraw between
// finding the node and reading it cannot fail the read.
func innerText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return evalJS[string](t, ctx, `(n => n ? n.innerText : 'NO NODE '+`+js(sel)+`)(document.querySelector(`+js(sel)+`))`)
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
