package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// sqliteNode is one process's runtime over a shared SQLite file.
type sqliteNode struct {
	t      *testing.T
	stores sqlite.Stores
	rt     *loom.Runtime
}

// openSQLiteNode opens a runtime over the SQLite file at path with cfg's
// hooks; Close closes the runtime, then the file.
func openSQLiteNode(t *testing.T, path string, cfg loom.Config, flows ...*loom.Flow) *sqliteNode {
	t.Helper()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Events, cfg.Snapshots, cfg.Flows = st.Events, st.Snapshots, flows
	rt, err := loom.New(cfg)
	if err != nil {
		_ = st.Close()
		t.Fatal(err)
	}
	n := &sqliteNode{t: t, stores: st, rt: rt}
	t.Cleanup(n.Close)
	return n
}

func (n *sqliteNode) Close() {
	if n.rt != nil {
		_ = n.rt.Close()
		n.rt = nil
		if err := n.stores.Close(); err != nil {
			n.t.Error(err)
		}
	}
}

func (n *sqliteNode) log(id string) []event.Envelope {
	n.t.Helper()
	evs, err := store.Read(context.Background(), n.stores.Events, id)
	if err != nil {
		n.t.Fatal(err)
	}
	return evs
}

// mailFlow runs the tool "mail.send" after a gate; the step's error (a
// denial) is the flow's result, so the test reads it from the output.
func mailFlow() *loom.Flow {
	send := loom.NewStep("send", func(ctx context.Context, to string) (string, error) {
		return "sent to " + to, nil
	}, loom.ToolID("mail.send"))
	return loom.NewFlow("mail", func(ctx *loom.Context, to string) (string, error) {
		if _, err := ctx.Suspend("approve"); err != nil {
			return "", err
		}
		out, err := loom.Run(ctx, send, to)
		var denied *effect.CapabilityDeniedError
		if errors.As(err, &denied) {
			return "denied", nil
		}
		return out, err
	})
}

// runMail starts the mail flow as principal in one process, parks it,
// closes that process and resumes it in a second one over the same file —
// so the step runs on the replay path, where only the log knows who
// started it — and returns the result and the log.
func runMail(t *testing.T, az effect.Authorizer, principal any) (string, []event.Envelope) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loom.db")
	cfg := loom.Config{EffectAuthorizer: az, StickyParks: -1}
	first := openSQLiteNode(t, path, cfg, mailFlow())
	ctx := testCtx(t)
	id, err := first.rt.Start(loom.WithPrincipal(ctx, principal), "mail", "bob@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	first.Close()
	second := openSQLiteNode(t, path, cfg, mailFlow())
	if err := second.rt.Resume(ctx, id, loom.ResumeEvent{EventType: "approve"}); err != nil {
		t.Fatal(err)
	}
	res, err := second.rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := decodeJSON(res.Output, &out); err != nil {
		t.Fatal(err)
	}
	return out, second.log(id)
}

func countType(evs []event.Envelope, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func TestK2_AGrantReachesTheStartersPrincipalOnTheReplayPath(t *testing.T) {
	grants := effect.NewGrantTable()
	if err := grants.Grant("user-a", "mail.send"); err != nil {
		t.Fatal(err)
	}
	out, log := runMail(t, grants, "user-a")
	if out != "sent to bob@example.com" || countType(log, event.EffectDenied) != 0 {
		t.Fatalf("user-a's execution: %q, %d denials", out, countType(log, event.EffectDenied))
	}
	out, log = runMail(t, grants, "user-b")
	if out != "denied" || countType(log, event.EffectDenied) != 1 {
		t.Fatalf("user-b's execution: %q, %d denials", out, countType(log, event.EffectDenied))
	}
	st := fold.Fold(log)
	if fr := st.Frames["send"]; fr.Status != fold.FrameFailed {
		t.Fatalf("user-b's step frame is %s, want failed", fr.Status)
	}
}

func TestK2_ATenantGrantMatchesTheRecordedTenant(t *testing.T) {
	grants := effect.NewGrantTable()
	if err := grants.Grant(effect.TenantSubject("acme"), "mail.*"); err != nil {
		t.Fatal(err)
	}
	if out, _ := runMail(t, grants, loom.Principal{ID: "u1", Tenant: "acme"}); out != "sent to bob@example.com" {
		t.Fatalf("acme's user: %q", out)
	}
	if out, log := runMail(t, grants, loom.Principal{ID: "u2", Tenant: "globex"}); out != "denied" || countType(log, event.EffectDenied) != 1 {
		t.Fatalf("globex's user: %q", out)
	}
}

func TestK12_AnAgentScopedPolicyDeniesWhatTheGrantAllows(t *testing.T) {
	grants := effect.NewGrantTable()
	if err := grants.Grant("u", "*"); err != nil {
		t.Fatal(err)
	}
	az, err := effect.NewPolicyAuthorizer(grants, effect.Policies{Agent: map[string][]effect.Policy{
		"researcher": {{Name: "read-only", Deny: []effect.Rule{{Effect: "mail.*"}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := runMail(t, az, loom.Principal{ID: "u"}); out != "sent to bob@example.com" {
		t.Fatalf("no agent: %q", out)
	}
	out, log := runMail(t, az, loom.Principal{ID: "u", Agent: "researcher"})
	if out != "denied" {
		t.Fatalf("the researcher agent: %q", out)
	}
	st := fold.Fold(log)
	if len(st.Variables.Verdicts) != 1 || st.Variables.Verdicts[0].Type != event.EffectDenied {
		t.Fatalf("verdicts %+v", st.Variables.Verdicts)
	}
}

func TestK2_APolicyTightensAGrantAndNeverWidensIt(t *testing.T) {
	grants := effect.NewGrantTable()
	if err := grants.Grant("user-a", "http.get"); err != nil { // not mail.send
		t.Fatal(err)
	}
	allowAll, err := effect.NewPolicyAuthorizer(grants, effect.Policies{App: []effect.Policy{
		{Name: "everything", Allow: []effect.Rule{{Effect: "*"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := runMail(t, allowAll, "user-a"); out != "denied" {
		t.Fatalf("a policy allowing everything widened the grant: %q", out)
	}
	grants2 := effect.NewGrantTable()
	if err := grants2.Grant("user-a", "mail.send"); err != nil {
		t.Fatal(err)
	}
	denyMail, err := effect.NewPolicyAuthorizer(grants2, effect.Policies{App: []effect.Policy{
		{Name: "no-mail", Deny: []effect.Rule{{Effect: "mail.*"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := runMail(t, denyMail, "user-a"); out != "denied" {
		t.Fatalf("a deny policy did not tighten the grant: %q", out)
	}
}

func TestK2_TheEffectSeesTheRecordedIdentityAndTheApprover(t *testing.T) {
	var seen effect.Request
	az := effect.AuthorizerFunc(func(ctx context.Context, req effect.Request) error {
		seen = req
		return nil
	})
	h := newHarnessWith(t, loom.Config{EffectAuthorizer: az, StickyParks: -1, ResumeAuthenticator: approverIs("carol")}, mailFlow())
	ctx := loom.WithPrincipal(h.ctx(), loom.Principal{ID: "u1", Tenant: "acme", Agent: "mailer"})
	id, err := h.rt.Start(ctx, "mail", "x")
	if err != nil {
		t.Fatal(err)
	}
	resume(t, h, id, "approve", "null")
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	p, ok := seen.Principal.(loom.Principal)
	if !ok || p.ID != "u1" || seen.Tenant != "acme" || seen.Agent != "mailer" || seen.FlowID != "mail" || seen.StepID != "send" {
		t.Fatalf("request %+v", seen)
	}
	if seen.Approver != "carol" {
		t.Fatalf("approver %#v, want the authenticated approver", seen.Approver)
	}
}

// approverIs authenticates every resume as principal.
type approverIs string

func (a approverIs) Authenticate(context.Context, string, loom.ResumeEvent) (json.RawMessage, error) {
	return json.RawMessage(`"` + string(a) + `"`), nil
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func decodeJSON(raw json.RawMessage, v any) error { return json.Unmarshal(raw, v) }
