package main

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/wire"
)

// TestControlCommands drives a real wire server (a runtime over a SQLite
// file, on loopback) with the binary: start, resume, fork, cancel and the
// handshake, their refusals and exit statuses, then reads the same file.
func TestControlCommands(t *testing.T) {
	bin, _ := setup(t)
	path := filepath.Join(t.TempDir(), "served.db")
	a, err := openApp(path, newStepClock("2026-02-01T10:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.close(); err != nil {
			t.Error(err)
		}
	}()
	h, err := wire.Handler(a.rt, wire.Options{Events: a.stores.Events, Authenticate: wire.BearerToken("t0ken", map[string]string{"user": "carol"})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctl := func(args ...string) []string { return append(args, "--addr", addr, "--token", "t0ken") }

	out := mustLoom(t, bin, ctl("handshake")...)
	for _, want := range []string{"Wire ABI      " + wire.Version, "Kernel ABI    " + loom.KernelABIVersion, "execution.subscribe", "execution.resolve", "execution.gate", "execution.watch",
		"Flow          shop.order (gates with a schema: approve; loom gate <id> shows one's schema)", "Flow          shop.refund (no gate declares a schema"} {
		if !strings.Contains(out, want) {
			t.Fatalf("handshake: missing %q in\n%s", want, out)
		}
	}
	var hs wire.Handshake
	decodeJSON(t, mustLoom(t, bin, ctl("handshake", "--json")...), &hs)
	if hs.WireABIVersion != wire.Version || len(hs.Syscalls) == 0 || len(hs.Flows) != 3 || len(hs.Flows[1].ResumeSchemas) != 1 {
		t.Fatalf("handshake --json: %+v", hs)
	}

	out = mustLoom(t, bin, ctl("start", flowOrder, "--input", `{"item":"rare-tea","qty":2}`, "--id", "web-1")...)
	park := regexp.MustCompile(`web-1 is parked on gate approve \(#(\d+)\)\. Answer with: loom resume web-1 --event approve --payload JSON`).FindStringSubmatch(out)
	if !strings.HasPrefix(out, "Started web-1 (flow shop.order).\n") || park == nil {
		t.Fatalf("start:\n%s", out)
	}

	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{ctl("start", flowOrder, "--id", "web-1"), exitRefused, "an execution with this id exists"},
		{ctl("start", "shop.nothing"), exitNotFound, `no flow "shop.nothing" is registered; the app registers shop.flaky, shop.order, shop.refund`},
		{ctl("start", flowOrder, "--input", "{item: tea}"), exitUsage, "--input is not JSON"},
		{ctl("resume", "web-1", "--event", "ship", "--payload", `{"approved":true}`), exitRefused, "refused (gate-mismatch); nothing was recorded: the execution is parked on gate "},
		{ctl("resume", "web-1", "--event", "EXECUTION_COMPLETED"), exitRefused, "refused (kernel-event-type)"},
		{ctl("resume", "web-1", "--event", gate, "--payload", `{"approved":"yes"}`), exitRefused, `does not satisfy the schema of gate "approve" at /approved`},
		{ctl("resume", "web-1"), exitUsage, "--event is required"},
		{ctl("resume", "web-9", "--event", gate, "--payload", `{"approved":true}`), exitNotFound, "no such execution"},
		{ctl("fork", "web-1"), exitUsage, "--at is required"},
		{ctl("fork", "web-1", "--at", "99"), exitNotFound, "sequence 99 is past the end of the log"},
		{ctl("fork", "web-1", "--at", "9223372036854775807"), exitNotFound, "sequence 9223372036854775807 is past the end of the log"},
		// Never sent rewritten to U+FFFD, which would address another id.
		{ctl("start", flowOrder, "--id", "web-\xff"), exitUsage, "not valid UTF-8"},
		{ctl("resume", "web-1", "--event", gate, "--payload", `{"approved":true,"note":"\udc00"}`), exitUsage, "not valid UTF-8"},
		{ctl("cancel", "web-1", "--reason", "\xc3"), exitUsage, "nothing was sent"},
		{[]string{"cancel", "web-1", "--addr", addr, "--token", "guess"}, exitRefused, "the app refused the token: pass its token with --token, or set LOOM_TOKEN"},
		{[]string{"cancel", "web-1", "--addr", addr}, exitRefused, "the app refused the token"},
		{ctl("cancel", "web-9"), exitNotFound, "no such execution"},
		{[]string{"handshake", "--addr", "ftp://x"}, exitUsage, "--addr"},
	} {
		out, errOut, code := loomRun(t, bin, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) {
			t.Errorf("loom %v: exit %d, stderr %q (stdout %q); want exit %d saying %q", tc.args, code, errOut, out, tc.code, tc.says)
		}
	}

	var res wire.ResumeResult
	decodeJSON(t, mustLoom(t, bin, ctl("resume", "web-1", "--event", gate, "--payload", `{"approved":true,"note":"ok"}`, "--json")...), &res)
	st, err := fold.Decode(res.State)
	if err != nil || st.Status != fold.StatusCompleted || len(st.Variables.Approvals) != 1 || short(st.Variables.Approvals[0].Principal, 100) != `{"user":"carol"}` {
		t.Fatalf("resume --json: %s (%v)", res.State, err)
	}
	out = mustLoom(t, bin, ctl("fork", "web-1", "--at", park[1], "--simulate", "--id", "web-1-b")...)
	if !strings.Contains(out, "Forked web-1 at #"+park[1]+" into web-1-b as a simulation; the original is untouched.") ||
		!strings.Contains(out, "web-1-b is parked on gate approve") {
		t.Fatalf("fork:\n%s", out)
	}
	if out := mustLoom(t, bin, ctl("cancel", "web-1-b", "--reason", "not needed")...); out != "Cancelled web-1-b; the cancel is durable.\n" {
		t.Fatalf("cancel: %q", out)
	}
	if _, errOut, code := loomRun(t, bin, ctl("cancel", "web-1-b")...); code != exitRefused || !strings.Contains(errOut, "terminal") {
		t.Fatalf("a second cancel: exit %d %s", code, errOut)
	}
	out = mustLoom(t, bin, ctl("start", flowRefund, "--input", "5", "--wait=false")...)
	if !regexp.MustCompile(`^Started [0-9a-f]{32} \(flow shop\.refund\)\.\n$`).MatchString(out) {
		t.Fatalf("start --wait=false with a minted id: %q", out)
	}

	// Nothing listens on a closed port: the advice names --addr.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if _, errOut, code := loomRun(t, bin, "handshake", "--addr", closed); code != exitFailure || !strings.Contains(errOut, "no Loom wire ABI answered at "+closed) {
		t.Fatalf("an address with no server: exit %d %s", code, errOut)
	}

	// The read-only commands see what the control commands did.
	out = mustLoom(t, bin, "ls", "--store", path)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^web-1\s+shop\.order\s+completed\s`),
		regexp.MustCompile(`(?m)^web-1-b\s+shop\.order\s+cancelled\s+\d+\s+\S+\s+fork of web-1 at #` + park[1] + ` \(simulation\)$`),
	} {
		if !want.MatchString(out) {
			t.Fatalf("ls after the control commands: no %s in\n%s", want, out)
		}
	}
}

// TestLogsFollow tails a log that another process appends to, and exits 0
// by itself once the execution ends; following an execution that already
// ended exits at once.
func TestLogsFollow(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	bg := startLoom(t, bin, "logs", "order-2", "--follow", "--store", path)
	bg.waitLine(t, "EXECUTION_SUSPENDED  parked on approve", 30*time.Second)

	a, err := openApp(path, newStepClock("2026-01-06T09:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := a.answer(ctx, "order-2", "dave", true)
	if cerr := a.close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	if st.Status != fold.StatusCompleted {
		t.Fatalf("order-2 ended %s", st.Status)
	}
	bg.waitLine(t, `APPROVAL_GRANTED     {"user":"dave"} for approve`, 30*time.Second)
	last := bg.waitLine(t, "EXECUTION_COMPLETED", 30*time.Second)
	if want := fmt.Sprintf("#%-4d", st.Sequence); !strings.HasPrefix(last, want) {
		t.Fatalf("the last followed line %q is not #%d", last, st.Sequence)
	}
	select {
	case err := <-bg.done:
		if err != nil {
			t.Fatalf("logs --follow after the execution ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("logs --follow did not exit when the execution ended")
	}

	out, errOut, code := loomRun(t, bin, "logs", "order-1", "--follow", "--store", path)
	if code != exitOK || !strings.Contains(out, "EXECUTION_COMPLETED") || !strings.Contains(errOut, "The execution completed at #") {
		t.Fatalf("logs --follow of an ended execution: exit %d\n%s%s", code, out, errOut)
	}
}

// TestLogsFollowProgress: on a terminal (here --progress always, stderr
// and stdout in one stream), an idle follower says on stderr what it
// waits for, and clears that line before each event it prints; stdout
// alone never holds it.
func TestLogsFollowProgress(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	parked := readLog(t, path, "order-2")
	bg := startLoomMerged(t, bin, "logs", "order-2", "--follow", "--store", path, "--progress", "always")
	bg.waitLine(t, "EXECUTION_SUSPENDED  parked on approve", 30*time.Second)

	a, err := openApp(path, newStepClock("2026-01-06T09:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := a.answer(ctx, "order-2", "dave", true)
	if cerr := a.close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	// The first line after the park starts with the waiting line, cleared.
	line := bg.waitLine(t, "#"+strconv.Itoa(len(parked)), 30*time.Second)
	waited := fmt.Sprintf("following order-2: waiting for #%d (parked on approve)", len(parked))
	if !strings.HasPrefix(line, "\r\033[K"+waited) || !strings.Contains(line, "\r\033[K#"+strconv.Itoa(len(parked))+" ") {
		t.Fatalf("the line after the park is %q, want the cleared %q, then the event", line, waited)
	}
	bg.waitLine(t, "The execution completed at #"+strconv.FormatInt(st.Sequence, 10), 30*time.Second)
	select {
	case err := <-bg.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("logs --follow did not exit when the execution ended")
	}
}
