package effect

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// mustPolicies builds a PolicyAuthorizer or fails the test.
func mustPolicies(t *testing.T, base Authorizer, p Policies) *PolicyAuthorizer {
	t.Helper()
	a, err := NewPolicyAuthorizer(base, p)
	if err != nil {
		t.Fatalf("NewPolicyAuthorizer: %v", err)
	}
	return a
}

// checkVerdict fails unless err allows (wantBy == "") or is a
// *CapabilityDeniedError by wantBy whose Reason contains wantReason.
func checkVerdict(t *testing.T, err error, wantBy, wantReason string) {
	t.Helper()
	if wantBy == "" {
		if err != nil {
			t.Fatalf("Authorize: %v, want allowed", err)
		}
		return
	}
	var de *CapabilityDeniedError
	if !errors.Is(err, ErrCapabilityDenied) || !errors.As(err, &de) {
		t.Fatalf("Authorize: %v, want a *CapabilityDeniedError", err)
	}
	if de.By != wantBy || !strings.Contains(de.Reason, wantReason) {
		t.Fatalf("denied by %q for %q, want by %q for …%q…", de.By, de.Reason, wantBy, wantReason)
	}
}

func TestPolicyRules(t *testing.T) {
	noShell := Policy{Name: "no-shell", Deny: []Rule{{Effect: "shell.*"}}}
	tests := []struct {
		name       string
		policies   []Policy
		req        Request
		wantBy     string // "" = allowed
		wantReason string
	}{
		{"a policy with no rules allows", []Policy{{Name: "empty"}}, Request{ToolID: "shell.exec"}, "", ""},
		{"a matching deny rule denies", []Policy{noShell}, Request{ToolID: "shell.exec"}, "policy:no-shell", `Deny[0] {effect "shell.*"} matched`},
		{"a deny rule that does not match allows", []Policy{noShell}, Request{ToolID: "fs.read"}, "", ""},
		{"deny wins over a matching allow", []Policy{{Name: "p", Allow: []Rule{{Effect: "*"}}, Deny: []Rule{{Effect: "shell.*"}}}},
			Request{ToolID: "shell.exec"}, "policy:p", "Deny[0]"},
		{"the first matching deny rule is reported", []Policy{{Name: "p", Deny: []Rule{{Effect: "db.*"}, {Step: "s?"}, {Effect: "*"}}}},
			Request{ToolID: "fs.read", StepID: "s1"}, "policy:p", `Deny[1] {step "s?"} matched`},
		{"an allow list allows what it names", []Policy{{Name: "p", Allow: []Rule{{Effect: "db.*"}, {Effect: "mail.send"}}}},
			Request{ToolID: "mail.send"}, "", ""},
		{"an allow list denies what it does not name", []Policy{{Name: "p", Allow: []Rule{{Effect: "db.*"}, {Effect: "mail.send"}}}},
			Request{ToolID: "shell.exec"}, "policy:p", "no Allow rule matched (of 2)"},
		{"rule fields are a conjunction (one field off)", []Policy{{Name: "p", Deny: []Rule{{Effect: "db.*", Tenant: "acme"}}}},
			Request{ToolID: "db.write", Tenant: "globex"}, "", ""},
		{"rule fields are a conjunction (all match)", []Policy{{Name: "p", Deny: []Rule{{Effect: "db.*", Tenant: "acme"}}}},
			Request{ToolID: "db.write", Tenant: "acme"}, "policy:p", `{effect "db.*", tenant "acme"}`},
		{"a step glob", []Policy{{Name: "p", Deny: []Rule{{Step: "cleanup-*"}}}},
			Request{ToolID: "fs.delete", StepID: "cleanup-3"}, "policy:p", `{step "cleanup-*"}`},
		{"a tenant pattern does not match a request with no tenant", []Policy{{Name: "p", Allow: []Rule{{Tenant: "acme"}}}},
			Request{ToolID: "fs.read"}, "policy:p", "no Allow rule matched"},
		{"a tenant star matches a request with no tenant", []Policy{{Name: "p", Allow: []Rule{{Tenant: "*"}}}},
			Request{ToolID: "fs.read"}, "", ""},
		{"an empty deny rule denies everything", []Policy{{Name: "lockdown", Deny: []Rule{{}}}},
			Request{ToolID: "fs.read"}, "policy:lockdown", "Deny[0] {any} matched"},
		{"an empty allow rule allows everything", []Policy{{Name: "open", Allow: []Rule{{}}}},
			Request{ToolID: "fs.read"}, "", ""},
		{"every app policy must allow", []Policy{{Name: "allow-fs", Allow: []Rule{{Effect: "fs.*"}}}, {Name: "no-write", Deny: []Rule{{Effect: "*.write"}}}},
			Request{ToolID: "fs.write"}, "policy:no-write", "app policy"},
		{"the first denying policy is reported", []Policy{{Name: "first", Deny: []Rule{{}}}, {Name: "second", Deny: []Rule{{}}}},
			Request{ToolID: "fs.read"}, "policy:first", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustPolicies(t, nil, Policies{App: tt.policies})
			checkVerdict(t, a.Authorize(context.Background(), tt.req), tt.wantBy, tt.wantReason)
		})
	}
}

// foreignError is a base authorizer's own error type.
type foreignError struct{}

func (foreignError) Error() string { return "quota of grants exhausted" }

func TestPolicyTightensNeverWidens(t *testing.T) {
	grants := NewGrantTable()
	if err := grants.Grant("alice", "fs.*"); err != nil {
		t.Fatal(err)
	}
	allowAll := Policy{Name: "allow-all", Allow: []Rule{{Effect: "*"}}}
	denyWrite := Policy{Name: "no-write", Deny: []Rule{{Effect: "*.write"}}}
	tests := []struct {
		name       string
		base       Authorizer
		app        []Policy
		req        Request
		wantBy     string
		wantReason string
	}{
		{"no base and no policies allows", nil, nil, Request{ToolID: "anything"}, "", ""},
		{"base denies, policy allows: denied", grants, []Policy{allowAll}, Request{ToolID: "shell.exec", Principal: "alice"}, ByGrants, "no grant"},
		{"base denies, no policies: denied", grants, nil, Request{ToolID: "shell.exec", Principal: "alice"}, ByGrants, ""},
		{"base allows, policy denies: denied", grants, []Policy{denyWrite}, Request{ToolID: "fs.write", Principal: "alice"}, "policy:no-write", "Deny[0]"},
		{"base allows, policy allows: allowed", grants, []Policy{allowAll, denyWrite}, Request{ToolID: "fs.read", Principal: "alice"}, "", ""},
		{"base allows, allow list excludes: denied", grants, []Policy{{Name: "only-db", Allow: []Rule{{Effect: "db.*"}}}},
			Request{ToolID: "fs.read", Principal: "alice"}, "policy:only-db", "no Allow rule"},
		{"a foreign base error is attributed to the base", AuthorizerFunc(func(context.Context, Request) error { return foreignError{} }),
			[]Policy{allowAll}, Request{ToolID: "fs.read"}, ByBase, "quota of grants exhausted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustPolicies(t, tt.base, Policies{App: tt.app})
			checkVerdict(t, a.Authorize(context.Background(), tt.req), tt.wantBy, tt.wantReason)
		})
	}
}

func TestPolicyBaseErrorUnwraps(t *testing.T) {
	canceled := AuthorizerFunc(func(ctx context.Context, _ Request) error { return ctx.Err() })
	a := mustPolicies(t, canceled, Policies{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := a.Authorize(ctx, Request{ToolID: "fs.read"})
	if !errors.Is(err, ErrCapabilityDenied) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Authorize: %v, want both ErrCapabilityDenied and context.Canceled", err)
	}
	var fe foreignError
	a = mustPolicies(t, AuthorizerFunc(func(context.Context, Request) error { return foreignError{} }), Policies{})
	if err := a.Authorize(context.Background(), Request{ToolID: "x"}); !errors.As(err, &fe) {
		t.Fatalf("Authorize: %v, want the base's foreignError reachable with errors.As", err)
	}
}

func TestPolicyScopes(t *testing.T) {
	p := Policies{
		App: []Policy{{Name: "no-shell", Deny: []Rule{{Effect: "shell.*"}}}},
		Flow: map[string][]Policy{
			"billing": {{Name: "billing-only", Allow: []Rule{{Effect: "db.*"}, {Effect: "mail.send"}}}},
		},
		Agent: map[string][]Policy{
			"researcher": {{Name: "read-only", Deny: []Rule{{Effect: "*.write"}}}},
		},
	}
	tests := []struct {
		name       string
		req        Request
		wantBy     string
		wantReason string
	}{
		{"app policy applies to every flow", Request{ToolID: "shell.exec", FlowID: "other"}, "policy:no-shell", "app policy"},
		{"flow policy applies to its flow", Request{ToolID: "fs.read", FlowID: "billing"}, "policy:billing-only", `flow "billing" policy`},
		{"flow policy allows within its flow", Request{ToolID: "db.write", FlowID: "billing"}, "", ""},
		{"flow policy does not apply to another flow", Request{ToolID: "fs.read", FlowID: "other"}, "", ""},
		{"flow policy does not apply without a flow", Request{ToolID: "fs.read"}, "", ""},
		{"agent policy applies to its agent", Request{ToolID: "fs.write", Agent: "researcher"}, "policy:read-only", `agent "researcher" policy`},
		{"agent policy does not apply to another agent", Request{ToolID: "fs.write", Agent: "writer"}, "", ""},
		{"agent policy does not apply without an agent", Request{ToolID: "fs.write"}, "", ""},
		{"flow and agent policies both apply", Request{ToolID: "db.write", FlowID: "billing", Agent: "researcher"}, "policy:read-only", "Deny[0]"},
		{"app is checked before flow and agent", Request{ToolID: "shell.write", FlowID: "billing", Agent: "researcher"}, "policy:no-shell", "app policy"},
		{"flow is checked before agent", Request{ToolID: "fs.write", FlowID: "billing", Agent: "researcher"}, "policy:billing-only", ""},
	}
	a := mustPolicies(t, nil, p)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkVerdict(t, a.Authorize(context.Background(), tt.req), tt.wantBy, tt.wantReason)
		})
	}
}

func TestPolicyAuthorizerCopiesItsPolicies(t *testing.T) {
	p := Policies{
		App:  []Policy{{Name: "no-shell", Deny: []Rule{{Effect: "shell.*"}}}},
		Flow: map[string][]Policy{"f": {{Name: "lockdown", Deny: []Rule{{}}}}},
	}
	a := mustPolicies(t, nil, p)
	p.App[0].Deny[0].Effect = "nothing"
	p.Flow["f"] = nil
	checkVerdict(t, a.Authorize(context.Background(), Request{ToolID: "shell.exec"}), "policy:no-shell", "")
	checkVerdict(t, a.Authorize(context.Background(), Request{ToolID: "fs.read", FlowID: "f"}), "policy:lockdown", "")
}

func TestNewPolicyAuthorizerRefuses(t *testing.T) {
	long := strings.Repeat("a", MaxPatternBytes+1)
	tests := []struct {
		name    string
		p       Policies
		pattern bool // also a *PatternError
		where   string
	}{
		{"empty policy name", Policies{App: []Policy{{}}}, false, "app policy #0"},
		{"policy name with a control character", Policies{App: []Policy{{Name: "a\nb"}}}, false, "control character"},
		{"pattern over the limit", Policies{App: []Policy{{Name: "p", Allow: []Rule{{Effect: long}}}}}, true, `app policy "p" Allow[0].Effect`},
		{"pattern not UTF-8", Policies{Flow: map[string][]Policy{"f": {{Name: "p", Deny: []Rule{{}, {Tenant: "\xff"}}}}}}, true, `flow "f" policy "p" Deny[1].Tenant`},
		{"agent rule pattern over the limit", Policies{Agent: map[string][]Policy{"a": {{Name: "p", Deny: []Rule{{Step: long}}}}}}, true, `agent "a" policy "p" Deny[0].Step`},
		{"empty flow key", Policies{Flow: map[string][]Policy{"": {{Name: "p"}}}}, false, "empty flow key"},
		{"empty agent key", Policies{Agent: map[string][]Policy{"": {{Name: "p"}}}}, false, "empty agent key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewPolicyAuthorizer(nil, tt.p)
			if a != nil || !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("NewPolicyAuthorizer = %v, %v; want nil, ErrInvalidPolicy", a, err)
			}
			var pe *PatternError
			if got := errors.As(err, &pe); got != tt.pattern {
				t.Fatalf("errors.As(*PatternError) = %v, want %v (err %v)", got, tt.pattern, err)
			}
			if !strings.Contains(err.Error(), tt.where) {
				t.Fatalf("error %q does not say %q", err, tt.where)
			}
		})
	}
	t.Run("the reported error does not depend on map order", func(t *testing.T) {
		bad := Policies{Flow: map[string][]Policy{}}
		for _, k := range []string{"d", "b", "a", "c", "e"} {
			bad.Flow[k] = []Policy{{Name: "p-" + k, Deny: []Rule{{Effect: long}}}}
		}
		for range 20 {
			_, err := NewPolicyAuthorizer(nil, bad)
			if err == nil || !strings.Contains(err.Error(), `flow "a" policy "p-a"`) {
				t.Fatalf("error %v, want the first key in order", err)
			}
		}
	})
}

func TestPolicyDenialNeverEchoesPrincipal(t *testing.T) {
	a := mustPolicies(t, nil, Policies{App: []Policy{
		{Name: "no-shell", Deny: []Rule{{Effect: "shell.*"}}},
		{Name: "tenants", Allow: []Rule{{Tenant: "acme"}}},
	}})
	for _, req := range []Request{
		{ToolID: "shell.exec", StepID: "s1", Principal: "secret-principal", Tenant: "secret-tenant"},
		{ToolID: "fs.read", StepID: "s1", Principal: botPrincipal{"secret-principal"}, Tenant: "secret-tenant"},
	} {
		err := a.Authorize(context.Background(), req)
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Fatalf("denial %v: want one that names neither principal nor tenant", err)
		}
		if !strings.Contains(err.Error(), `"`+req.ToolID+`" at step "s1" denied by policy:`) {
			t.Fatalf("denial %q does not name the tool, step and policy", err)
		}
	}
}
