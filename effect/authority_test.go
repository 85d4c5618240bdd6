package effect

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// A GrantTable allows only what was granted, to a principal id or to a whole
// tenant; everything else is denied with a *CapabilityDeniedError.
func ExampleGrantTable() {
	grants := NewGrantTable()
	if err := grants.Grant("alice", "fs.read", "http.*"); err != nil {
		panic(err)
	}
	if err := grants.Grant(TenantSubject("acme"), "mail.send"); err != nil {
		panic(err)
	}
	ctx := context.Background()

	fmt.Println(grants.Authorize(ctx, Request{ToolID: "http.get", Principal: "alice"}))
	fmt.Println(grants.Authorize(ctx, Request{ToolID: "mail.send", Principal: "bob", Tenant: "acme"}))

	err := grants.Authorize(ctx, Request{ToolID: "shell.exec", StepID: "cleanup", Principal: "alice"})
	var denied *CapabilityDeniedError
	fmt.Println(errors.Is(err, ErrCapabilityDenied), errors.As(err, &denied) && denied.By == ByGrants)
	fmt.Println(err)

	grants.Revoke("alice", "http.*")
	fmt.Println(grants.Authorize(ctx, Request{ToolID: "http.get", Principal: "alice"}) != nil)
	// Output:
	// <nil>
	// <nil>
	// true true
	// effect: tool "shell.exec" at step "cleanup" denied by grants: no grant to the request's principal or tenant matches the tool
	// true
}

// Policies tighten a base authorizer at three scopes: the app, one flow,
// one agent. No policy can allow what the base denies.
func ExampleNewPolicyAuthorizer() {
	grants := NewGrantTable()
	if err := grants.Grant("alice", "*"); err != nil { // alice may run every tool…
		panic(err)
	}
	authz, err := NewPolicyAuthorizer(grants, Policies{
		App: []Policy{{Name: "no-shell", Deny: []Rule{{Effect: "shell.*"}}}},
		Flow: map[string][]Policy{
			"billing": {{Name: "billing-tools", Allow: []Rule{{Effect: "db.*"}, {Effect: "mail.send"}}}},
		},
		Agent: map[string][]Policy{
			"researcher": {{Name: "read-only", Deny: []Rule{{Effect: "*.write"}, {Tenant: "internal", Step: "publish-*"}}}},
		},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, req := range []Request{
		{ToolID: "db.write", FlowID: "billing", StepID: "charge", Principal: "alice"},   // …within the policies
		{ToolID: "shell.exec", FlowID: "ops", StepID: "restart", Principal: "alice"},    // app policy
		{ToolID: "http.get", FlowID: "billing", StepID: "fetch", Principal: "alice"},    // billing's allow list
		{ToolID: "fs.write", Agent: "researcher", StepID: "save", Principal: "alice"},   // the agent's policy
		{ToolID: "http.get", FlowID: "research", StepID: "fetch", Principal: "alice"},   // nothing applies
		{ToolID: "http.get", FlowID: "research", StepID: "fetch", Principal: "mallory"}, // the base denies
	} {
		fmt.Println(authz.Authorize(ctx, req))
	}
	// Output:
	// <nil>
	// effect: tool "shell.exec" at step "restart" denied by policy:no-shell: app policy: Deny[0] {effect "shell.*"} matched
	// effect: tool "http.get" at step "fetch" denied by policy:billing-tools: flow "billing" policy: no Allow rule matched (of 2)
	// effect: tool "fs.write" at step "save" denied by policy:read-only: agent "researcher" policy: Deny[0] {effect "*.write"} matched
	// <nil>
	// effect: tool "http.get" at step "fetch" denied by grants: no grant to the request's principal or tenant matches the tool
}

func TestCapabilityDeniedError(t *testing.T) {
	base := errors.New("upstream said no")
	tests := []struct {
		name    string
		err     *CapabilityDeniedError
		message string
		unwraps error
	}{
		{"with a step and a reason", &CapabilityDeniedError{ToolID: "fs.write", StepID: "save", By: "policy:read-only", Reason: "app policy: Deny[0] {any} matched"},
			`effect: tool "fs.write" at step "save" denied by policy:read-only: app policy: Deny[0] {any} matched`, nil},
		{"without a step", &CapabilityDeniedError{ToolID: "fs.write", By: ByGrants, Reason: "no grant"},
			`effect: tool "fs.write" denied by grants: no grant`, nil},
		{"without a reason", &CapabilityDeniedError{ToolID: "fs.write", By: ByGrants}, `effect: tool "fs.write" denied by grants`, nil},
		{"quotes a tool id with odd characters", &CapabilityDeniedError{ToolID: "a\"b", By: ByGrants}, `effect: tool "a\"b" denied by grants`, nil},
		{"wrapping a foreign base error", &CapabilityDeniedError{ToolID: "x", By: ByBase, Reason: "the base authorizer denied: upstream said no", Err: base},
			`effect: tool "x" denied by base: the base authorizer denied: upstream said no`, base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error = fmt.Errorf("step failed: %w", tt.err)
			if tt.err.Error() != tt.message {
				t.Fatalf("Error() = %q, want %q", tt.err.Error(), tt.message)
			}
			var de *CapabilityDeniedError
			if !errors.Is(err, ErrCapabilityDenied) || !errors.As(err, &de) || de != tt.err {
				t.Fatalf("errors.Is/As through a wrap failed on %v", err)
			}
			if errors.Unwrap(tt.err) != tt.unwraps {
				t.Fatalf("Unwrap() = %v, want %v", errors.Unwrap(tt.err), tt.unwraps)
			}
			if errors.Is(err, ErrInvalidPattern) || errors.Is(err, ErrUnknownTool) {
				t.Fatal("a denial matches an unrelated sentinel")
			}
		})
	}
}

func TestTenantSubject(t *testing.T) {
	if got := TenantSubject("acme"); got != "tenant:acme" {
		t.Fatalf("TenantSubject(acme) = %q", got)
	}
}
