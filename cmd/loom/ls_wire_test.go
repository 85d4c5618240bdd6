package main

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/internal/testbin"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/wire"
)

// serveFixture serves a copy of the fixture store's app on loopback with
// two tokens: "ops-token" (a principal naming no tenant) and
// "billing-token" (the billing tenant's, whose executions are the
// refunds). It returns the server's address.
func serveFixture(t *testing.T, path string) (addr string) {
	t.Helper()
	a, err := openAppWith(path, newStepClock("2026-01-06T09:00:00Z"), func(cfg *loom.Config, _ sqlite.Stores) {
		cfg.Recovery = loom.Recovery{Disabled: true}
	})
	if err != nil {
		t.Fatal(err)
	}
	ops := wire.BearerToken("ops-token", "ops")
	billing := wire.BearerToken("billing-token", loom.Principal{ID: "billing-ops", Tenant: "billing"})
	h, err := wire.Handler(a.rt, wire.Options{Events: a.stores.Events, Authenticate: func(r *http.Request) (any, error) {
		if p, err := ops(r); err == nil {
			return p, nil
		}
		return billing(r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		if err := a.close(); err != nil {
			t.Error(err)
		}
	})
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestLsOverTheWirePrintsWhatTheStoreModePrints: loom ls --addr lists the
// app's executions through execution.list, with the same flags and the
// same text and --json output as loom ls --store on the app's store; the
// app scopes a tenant's token to its tenant; progress goes to stderr only.
func TestLsOverTheWirePrintsWhatTheStoreModePrints(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	addr := serveFixture(t, path)
	byStore := func(args ...string) string {
		return mustLoom(t, bin, append(append([]string{"ls"}, args...), "--store", path)...)
	}
	byWire := func(token string, args ...string) string {
		return mustLoom(t, bin, append(append([]string{"ls"}, args...), "--addr", addr, "--token", token)...)
	}
	for _, args := range [][]string{
		{"--json", "--limit", "100"},
		{"--json", "--limit", "5"},
		{"--json", "--limit", "5", "--after", "bulk-04"},
		{"--json", "--status", "suspended", "--limit", "3"},
		{"--json", "--flow", "shop.refund"},
		{"--json", "--flow", "shop.order", "--status", "completed"},
		{"--json", "--tenant", "billing"},
		{"--json", "--sort", "updated", "--limit", "4"},
		{"--json", "--sort", "status", "--limit", "4"},
		{"--limit", "100"},
		{"--status", "cancelled"},
	} {
		if s, w := byStore(args...), byWire("ops-token", args...); s != w {
			t.Errorf("ls %s:\n--store printed\n%s\n--addr printed\n%s", strings.Join(args, " "), s, w)
		}
	}
	// The hint to the next page names the mode's flag.
	if s, w := byStore("--limit", "3"), byWire("ops-token", "--limit", "3"); !strings.Contains(s, "More: loom ls --after bulk-02 (with the same --store and filters)") ||
		!strings.Contains(w, "More: loom ls --after bulk-02 (with the same --addr and filters)") ||
		strings.Replace(s, "--store", "--addr", 1) != w {
		t.Fatalf("ls --limit 3:\n%s\n%s", s, w)
	}

	// Paging over the wire visits every execution once, in order.
	var seen []string
	for after, pages := "", 0; pages < 20; pages++ {
		args := []string{"--json", "--limit", "4"}
		if after != "" {
			args = append(args, "--after", after)
		}
		var page lsPage
		decodeJSON(t, byWire("ops-token", args...), &page)
		for _, r := range page.Executions {
			seen = append(seen, r.ExecutionID)
		}
		if after = page.Next; after == "" {
			break
		}
	}
	want := append(append([]string{}, bulkIDs...), "flaky-1", "order-1", "order-1-what-if", "order-2", "order-3", "refund-1", "refund-2")
	if !slices.Equal(seen, want) {
		t.Fatalf("paging over the wire visited %v, want %v", seen, want)
	}

	// The billing tenant's token sees the refunds only, whatever it asks.
	var page lsPage
	decodeJSON(t, byWire("billing-token", "--json", "--limit", "100"), &page)
	if len(page.Executions) != 2 || page.Executions[0].ExecutionID != "refund-1" || page.Executions[1].Tenant != "billing" {
		t.Fatalf("the billing tenant lists %+v", page.Executions)
	}

	// Progress on stderr only; stdout stays JSON.
	out, errOut, code := loomRun(t, bin, "ls", "--addr", addr, "--token", "ops-token", "--json", "--limit", "3", "--status", "completed", "--progress", "always")
	if code != 0 || !strings.Contains(errOut, "ls: ") || !strings.Contains(errOut, "received from the app") || strings.Contains(out, "\r") || strings.Contains(out, "ls: ") {
		t.Fatalf("--progress always: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	decodeJSON(t, out, &page)
	if _, errOut, _ := loomRun(t, bin, "ls", "--addr", addr, "--token", "ops-token", "--json"); errOut != "" {
		t.Fatalf("progress on a stderr that is not a terminal: %q", errOut)
	}
}

// loom ls takes exactly one of --store and --addr; both, neither, or both
// variables without a flag are usage errors that say what to do, and a bad
// token or status is refused before anything is listed.
func TestLsWantsExactlyOneOfStoreAndAddr(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	addr := serveFixture(t, path)
	for _, c := range []struct {
		env  []string
		args []string
		code int
		says string
	}{
		{nil, []string{"ls", "--store", path, "--addr", addr}, exitUsage, "--store and --addr both given"},
		{nil, []string{"ls"}, exitUsage, "--store is required to read a store (a SQLite file or a PostgreSQL DSN), or --addr <host:port> (with --token) to ask a running app instead"},
		{[]string{"LOOM_STORE=" + path, "LOOM_ADDR=" + addr}, []string{"ls"}, exitUsage, "LOOM_STORE and LOOM_ADDR are both set"},
		{nil, []string{"ls", "--addr", addr, "--token", "guess"}, exitRefused, "the app refused the token"},
		{nil, []string{"ls", "--addr", addr, "--token", "ops-token", "--status", "parked"}, exitUsage, `--status "parked" is not a status`},
		{nil, []string{"ls", "--addr", addr, "--token", "ops-token", "--sort", "updated", "--after", "a"}, exitUsage, "--after pages in id order only"},
	} {
		_, errOut, code := testbin.Run(t, time.Minute, append(binaryEnv(), c.env...), bin, c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("%v %v: exit %d, want %d saying %q:\n%s", c.env, c.args, code, c.code, c.says, errOut)
		}
	}
	// One variable alone picks the mode.
	storeOut, _, code := testbin.Run(t, time.Minute, append(binaryEnv(), "LOOM_STORE="+path), bin, "ls", "--json", "--limit", "100")
	if code != 0 {
		t.Fatalf("ls with LOOM_STORE: exit %d", code)
	}
	wireOut, _, code := testbin.Run(t, time.Minute, append(binaryEnv(), "LOOM_ADDR="+addr, "LOOM_TOKEN=ops-token"), bin, "ls", "--json", "--limit", "100")
	if code != 0 || wireOut != storeOut {
		t.Fatalf("ls with LOOM_ADDR: exit %d\n%s\nwant\n%s", code, wireOut, storeOut)
	}
}
