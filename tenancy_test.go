package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func asTenant(ctx context.Context, tenant string) context.Context {
	return loom.WithPrincipal(ctx, loom.Principal{ID: "user@" + tenant, Tenant: tenant})
}

// authzTape records what the Authorizer is asked.
type authzTape struct {
	mu   sync.Mutex
	reqs []loom.AuthzRequest
}

func (a *authzTape) Authorize(_ context.Context, r loom.AuthzRequest) error {
	a.mu.Lock()
	a.reqs = append(a.reqs, r)
	a.mu.Unlock()
	return nil
}

func TestK12_AnOverLongOrInvalidTenantIsRefusedAtStartWithNothingAppended(t *testing.T) {
	h := newHarness(t)
	rt := h.open(approvalFlow(h))
	for _, tenant := range []string{strings.Repeat("t", store.MaxTenantLen+1), "bad\ntenant"} {
		_, err := rt.Start(asTenant(h.ctx(), tenant), "approval", order{Item: "disk", Qty: 1}, loom.WithExecutionID("refused"))
		var te *store.TenantError
		if !errors.As(err, &te) {
			t.Fatalf("tenant %q: err = %v, want *store.TenantError", tenant, err)
		}
		if got := h.log("refused"); len(got) != 0 {
			t.Fatalf("tenant %q: refused start appended %v", tenant, types(got))
		}
	}
}

func TestK12_ACallerOfAnotherTenantFindsNoExecutionAndAppendsNothing(t *testing.T) {
	authz := &authzTape{}
	h := newHarnessWith(t, loom.Config{Authorizer: authz, Features: loom.Features{Inbox: true}, Leases: memstore.NewLeaseStore()})
	flow := approvalFlow(h)
	rt := h.open(flow)
	acme := asTenant(h.ctx(), "acme")
	id, err := rt.Start(acme, "approval", order{Item: "disk", Qty: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(acme, id); err != nil {
		t.Fatal(err)
	}
	before := h.log(id)
	other := asTenant(h.ctx(), "globex")
	yes := loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage("true")}
	attempts := map[string]func() error{
		"resume":    func() error { return rt.Resume(other, id, yes) },
		"cancel":    func() error { return rt.Cancel(other, id, "not yours") },
		"send":      func() error { return rt.Send(other, id, "note", "hi") },
		"state":     func() error { _, err := rt.LoadState(other, id); return err },
		"state at":  func() error { _, err := rt.LoadStateAt(other, id, 1); return err },
		"wait":      func() error { _, err := rt.WaitForSuspend(other, id); return err },
		"fork":      func() error { _, err := rt.Fork(other, id, 1); return err },
		"resume-as": func() error { return rt.ResumeAs(other, id, yes, loom.OntoFlow("approval")) },
		"resolve": func() error {
			return rt.ResolveInDoubt(other, id, loom.Verdict{StepID: "price", Attempt: 1, Done: true})
		},
	}
	names := make([]string, 0, len(attempts))
	for name := range attempts { //loom:sorted below
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		err := attempts[name]()
		if !errors.Is(err, loom.ErrExecutionNotFound) {
			t.Fatalf("%s by another tenant: err = %v, want ErrExecutionNotFound", name, err)
		}
		sameEnvelopes(t, name+" by another tenant", h.log(id), before)
	}
	// Its own tenant, and a caller with no tenant (an operator), may.
	if _, err := rt.LoadState(loom.WithPrincipal(h.ctx(), "operator"), id); err != nil {
		t.Fatalf("an operator: %v", err)
	}
	if err := rt.Resume(acme, id, yes); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(acme, id); err != nil {
		t.Fatal(err)
	}
	authz.mu.Lock()
	defer authz.mu.Unlock()
	for _, r := range authz.reqs {
		if r.Tenant != "acme" {
			t.Fatalf("the authorizer saw %s of tenant %q, want acme", r.Action, r.Tenant)
		}
	}
	if len(authz.reqs) == 0 {
		t.Fatal("the authorizer was never asked")
	}
}

func TestK12_EffectsSeeTheRecordedTenant(t *testing.T) {
	var saw string
	step := loom.NewStep("who", func(ctx context.Context, _ struct{}) (string, error) {
		saw = loom.EffectContext(ctx).Tenant
		return saw, nil
	})
	flow := loom.NewFlow("tenanted", func(ctx *loom.Context, _ struct{}) (string, error) {
		return loom.Run(ctx, step, struct{}{})
	})
	h := newHarness(t)
	rt := h.open(flow)
	id, err := rt.Start(asTenant(h.ctx(), "acme"), "tenanted", struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	if saw != "acme" {
		t.Fatalf("the effect saw tenant %q", saw)
	}
	if got := store.TenantOf(h.log(id)[0]); got != "acme" {
		t.Fatalf("recorded tenant %q", got)
	}
}

func TestK12_ATenantViewReadsAndListsOnlyItsTenant(t *testing.T) {
	h := newHarness(t)
	rt := h.open(approvalFlow(h))
	ids := map[string][]string{}
	for i, tenant := range []string{"acme", "globex", "acme", "", "globex", "acme"} {
		ctx := h.ctx()
		if tenant != "" {
			ctx = asTenant(ctx, tenant)
		}
		id, err := rt.Start(ctx, "approval", order{Item: "disk", Qty: i + 1}, loom.WithExecutionID("x"+string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForSuspend(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
		ids[tenant] = append(ids[tenant], id)
	}
	view, err := store.ForTenant(h.events, "acme")
	if err != nil {
		t.Fatal(err)
	}
	// Pages of one: the view pages through the store past other tenants.
	var listed []string
	after := ""
	for {
		page, err := view.ListExecutions(h.ctx(), after, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Executions {
			listed = append(listed, e.ExecutionID)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if !slices.Equal(listed, ids["acme"]) {
		t.Fatalf("listed %v, want acme's %v", listed, ids["acme"])
	}
	other := ids["globex"][0]
	if evs, err := view.ReadFrom(h.ctx(), other, 0); err != nil || len(evs) != 0 {
		t.Fatalf("read another tenant's log: %d events, %v", len(evs), err)
	}
	if evs, err := store.ReadRange(h.ctx(), view, other, 0, 10); err != nil || len(evs) != 0 {
		t.Fatalf("range-read another tenant's log: %d events, %v", len(evs), err)
	}
	if _, err := view.Subscribe(h.ctx(), other, 0); err == nil {
		t.Fatal("followed another tenant's log")
	}
	if evs, err := view.ReadFrom(h.ctx(), ids["acme"][0], 0); err != nil || len(evs) == 0 {
		t.Fatalf("read its own: %d events, %v", len(evs), err)
	}
	before := h.log(ids["acme"][0])
	e := before[len(before)-1]
	e.Sequence++
	if err := view.Append(h.ctx(), ids["acme"][0], e.Sequence, []event.Envelope{e}); !errors.Is(err, store.ErrTenantViewReadOnly) {
		t.Fatalf("append through a view: %v", err)
	}
	sameEnvelopes(t, "after a refused append", h.log(ids["acme"][0]), before)
	for _, bad := range []string{"", strings.Repeat("x", store.MaxTenantLen+1)} {
		var te *store.TenantError
		if _, err := store.ForTenant(h.events, bad); !errors.As(err, &te) {
			t.Fatalf("ForTenant(%q): %v", bad, err)
		}
	}
}
