package effect

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// botPrincipal names itself through PrincipalIdentity.
type botPrincipal struct{ id string }

func (b botPrincipal) PrincipalID() string { return b.id }

// anonymousPrincipal has no id a GrantTable can read.
type anonymousPrincipal struct{ name string }

func sampleGrants(t *testing.T) *GrantTable {
	t.Helper()
	g := NewGrantTable()
	for _, grant := range []struct {
		subject string
		globs   []string
	}{
		{"alice", []string{"fs.read", "http.*"}},
		{TenantSubject("acme"), []string{"mail.send"}},
		{"svc-bot", []string{"queue.?ut"}},
	} {
		if err := g.Grant(grant.subject, grant.globs...); err != nil {
			t.Fatalf("Grant(%q): %v", grant.subject, err)
		}
	}
	return g
}

func TestGrantTableAuthorize(t *testing.T) {
	tests := []struct {
		name  string
		req   Request
		allow bool
	}{
		{"string principal, exact grant", Request{ToolID: "fs.read", Principal: "alice"}, true},
		{"string principal, glob grant", Request{ToolID: "http.get", Principal: "alice"}, true},
		{"string principal, ungranted tool", Request{ToolID: "fs.write", Principal: "alice"}, false},
		{"glob grant is anchored", Request{ToolID: "xhttp.get", Principal: "alice"}, false},
		{"another principal holds nothing", Request{ToolID: "fs.read", Principal: "bob"}, false},
		{"tenant grant covers any principal of the tenant", Request{ToolID: "mail.send", Principal: "bob", Tenant: "acme"}, true},
		{"tenant grant covers a request with no principal", Request{ToolID: "mail.send", Tenant: "acme"}, true},
		{"tenant grant does not cover another tenant", Request{ToolID: "mail.send", Principal: "bob", Tenant: "globex"}, false},
		{"principal and tenant grants are a union (principal)", Request{ToolID: "fs.read", Principal: "alice", Tenant: "acme"}, true},
		{"principal and tenant grants are a union (tenant)", Request{ToolID: "mail.send", Principal: "alice", Tenant: "acme"}, true},
		{"PrincipalIdentity names the subject", Request{ToolID: "queue.put", Principal: botPrincipal{"svc-bot"}}, true},
		{"PrincipalIdentity, ungranted tool", Request{ToolID: "queue.get", Principal: botPrincipal{"svc-bot"}}, false},
		{"a principal with no id holds nothing", Request{ToolID: "fs.read", Principal: anonymousPrincipal{"alice"}}, false},
		{"a non-string principal holds nothing", Request{ToolID: "fs.read", Principal: 42}, false},
		{"a principal cannot pass for a tenant", Request{ToolID: "mail.send", Principal: "tenant:acme"}, false},
		{"an identity cannot pass for a tenant", Request{ToolID: "mail.send", Principal: botPrincipal{"tenant:acme"}}, false},
		{"no principal and no tenant", Request{ToolID: "fs.read"}, false},
	}
	g := sampleGrants(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.Authorize(context.Background(), tt.req)
			if tt.allow && err != nil {
				t.Fatalf("Authorize: %v, want allowed", err)
			}
			if !tt.allow {
				var de *CapabilityDeniedError
				if !errors.As(err, &de) || de.By != ByGrants || de.ToolID != tt.req.ToolID {
					t.Fatalf("Authorize: %v, want a *CapabilityDeniedError by %q", err, ByGrants)
				}
			}
		})
	}
}

func TestGrantTableEmptyDeniesEverything(t *testing.T) {
	req := Request{ToolID: "fs.read", Principal: "alice", Tenant: "acme"}
	for _, tt := range []struct {
		name  string
		table *GrantTable
	}{
		{"NewGrantTable", NewGrantTable()},
		{"zero value", &GrantTable{}},
		{"nil table", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.table.Authorize(context.Background(), req); !errors.Is(err, ErrCapabilityDenied) {
				t.Fatalf("Authorize: %v, want ErrCapabilityDenied", err)
			}
		})
	}
}

func TestGrantTableRevoke(t *testing.T) {
	ctx := context.Background()
	g := sampleGrants(t)
	get := Request{ToolID: "http.get", Principal: "alice"}

	t.Run("revoking a glob the subject does not hold is a no-op", func(t *testing.T) {
		if g.Revoke("alice", "http.**") || g.Revoke("bob", "http.*") || g.Revoke("alice", "http.get") {
			t.Fatal("Revoke reported removing a grant that was never made")
		}
		if err := g.Authorize(ctx, get); err != nil {
			t.Fatalf("still granted: %v", err)
		}
	})
	t.Run("revoking the exact glob removes it", func(t *testing.T) {
		if !g.Revoke("alice", "http.*") {
			t.Fatal("Revoke(alice, http.*) = false, want true")
		}
		if err := g.Authorize(ctx, get); !errors.Is(err, ErrCapabilityDenied) {
			t.Fatalf("after revoke: %v, want denied", err)
		}
		if g.Revoke("alice", "http.*") {
			t.Fatal("second Revoke = true, want false")
		}
	})
	t.Run("the subject's other grants stay", func(t *testing.T) {
		if err := g.Authorize(ctx, Request{ToolID: "fs.read", Principal: "alice"}); err != nil {
			t.Fatalf("fs.read: %v", err)
		}
	})
	t.Run("revoking the last glob and granting again", func(t *testing.T) {
		if !g.Revoke("alice", "fs.read") {
			t.Fatal("Revoke(alice, fs.read) = false")
		}
		if err := g.Grant("alice", "fs.read"); err != nil {
			t.Fatal(err)
		}
		if err := g.Authorize(ctx, Request{ToolID: "fs.read", Principal: "alice"}); err != nil {
			t.Fatalf("re-granted: %v", err)
		}
	})
}

func TestGrantTableRefuses(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		globs   []string
		want    error
	}{
		{"empty subject", "", []string{"fs.read"}, ErrInvalidGrant},
		{"empty tenant", TenantPrefix, []string{"fs.read"}, ErrInvalidGrant},
		{"empty glob", "alice", []string{"fs.read", ""}, ErrInvalidPattern},
		{"glob over the limit", "alice", []string{"fs.read", strings.Repeat("x", MaxPatternBytes+1)}, ErrInvalidPattern},
		{"glob not UTF-8", "alice", []string{"fs.read", "\xff"}, ErrInvalidPattern},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGrantTable()
			if err := g.Grant(tt.subject, tt.globs...); !errors.Is(err, tt.want) {
				t.Fatalf("Grant: %v, want %v", err, tt.want)
			}
			// All or nothing: the valid glob of the refused call was not granted.
			if err := g.Authorize(context.Background(), Request{ToolID: "fs.read", Principal: "alice"}); err == nil {
				t.Fatal("a refused Grant granted part of its globs")
			}
		})
	}
	t.Run("no globs is a no-op", func(t *testing.T) {
		if err := NewGrantTable().Grant("alice"); err != nil {
			t.Fatalf("Grant with no globs: %v", err)
		}
	})
}

func TestGrantTableDenialNeverEchoesPrincipal(t *testing.T) {
	g := sampleGrants(t)
	for _, req := range []Request{
		{ToolID: "shell.exec", StepID: "s1", Principal: "secret-principal-token", Tenant: "secret-tenant"},
		{ToolID: "shell.exec", StepID: "s1", Principal: botPrincipal{"secret-principal-token"}},
		{ToolID: "shell.exec", StepID: "s1"},
	} {
		err := g.Authorize(context.Background(), req)
		msg := err.Error()
		if strings.Contains(msg, "secret") {
			t.Fatalf("denial echoes the principal or tenant: %s", msg)
		}
		if !strings.Contains(msg, `"shell.exec"`) || !strings.Contains(msg, `"s1"`) || !strings.Contains(msg, ByGrants) {
			t.Fatalf("denial does not name the tool, step and authority: %s", msg)
		}
	}
}

// TestGrantTableConcurrent grants, revokes and authorizes from many
// goroutines at once; run under -race it checks the locking, and the final
// state checks that no update was lost.
func TestGrantTableConcurrent(t *testing.T) {
	const workers, rounds = 8, 200
	g := NewGrantTable()
	if err := g.Grant(TenantSubject("shared"), "always.*"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range workers {
		subject := "worker-" + strconv.Itoa(w)
		wg.Go(func() {
			for i := range rounds {
				tool := "tool." + strconv.Itoa(i)
				if err := g.Grant(subject, tool, "keep.*"); err != nil {
					t.Error(err)
					return
				}
				if err := g.Authorize(context.Background(), Request{ToolID: tool, Principal: subject}); err != nil {
					t.Errorf("%s: own grant not seen: %v", subject, err)
					return
				}
				if !g.Revoke(subject, tool) {
					t.Errorf("%s: revoke of %s found nothing", subject, tool)
					return
				}
			}
		})
		wg.Go(func() {
			for range rounds {
				if err := g.Authorize(context.Background(), Request{ToolID: "always.on", Tenant: "shared"}); err != nil {
					t.Errorf("tenant grant lost: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	for w := range workers {
		subject := "worker-" + strconv.Itoa(w)
		if err := g.Authorize(context.Background(), Request{ToolID: "keep.x", Principal: subject}); err != nil {
			t.Fatalf("%s: lasting grant lost: %v", subject, err)
		}
		if err := g.Authorize(context.Background(), Request{ToolID: "tool.0", Principal: subject}); err == nil {
			t.Fatalf("%s: revoked grant still allows", subject)
		}
	}
}
