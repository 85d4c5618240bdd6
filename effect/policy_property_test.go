package effect

import (
	"context"
	"maps"
	"testing"

	"pgregory.net/rapid"
)

// The generators draw from tiny alphabets so that patterns and requests
// collide often: most properties are only interesting when rules match.

func genPattern() *rapid.Generator[string] {
	return rapid.OneOf(
		rapid.Just(""), // a field left empty: any
		rapid.StringOfN(rapid.RuneFrom([]rune("ab*?")), 1, 4, -1),
	)
}

func genRule() *rapid.Generator[Rule] {
	return rapid.Custom(func(t *rapid.T) Rule {
		return Rule{Effect: genPattern().Draw(t, "effect"), Tenant: genPattern().Draw(t, "tenant"), Step: genPattern().Draw(t, "step")}
	})
}

func genPolicy() *rapid.Generator[Policy] {
	return rapid.Custom(func(t *rapid.T) Policy {
		return Policy{
			Name:  rapid.SampledFrom([]string{"p", "q", "r"}).Draw(t, "name"),
			Allow: rapid.SliceOfN(genRule(), 0, 2).Draw(t, "allow"),
			Deny:  rapid.SliceOfN(genRule(), 0, 2).Draw(t, "deny"),
		}
	})
}

func genScoped(keys []string) *rapid.Generator[map[string][]Policy] {
	return rapid.MapOfN(rapid.SampledFrom(keys), rapid.SliceOfN(genPolicy(), 0, 2), 0, len(keys))
}

func genPolicies() *rapid.Generator[Policies] {
	return rapid.Custom(func(t *rapid.T) Policies {
		return Policies{
			App:   rapid.SliceOfN(genPolicy(), 0, 2).Draw(t, "app"),
			Flow:  genScoped([]string{"f1", "f2"}).Draw(t, "flow"),
			Agent: genScoped([]string{"a1", "a2"}).Draw(t, "agent"),
		}
	})
}

func genRequest() *rapid.Generator[Request] {
	id := rapid.StringOfN(rapid.RuneFrom([]rune("ab")), 0, 3, -1)
	return rapid.Custom(func(t *rapid.T) Request {
		return Request{
			ToolID:    id.Draw(t, "tool"),
			StepID:    id.Draw(t, "step"),
			Tenant:    rapid.SampledFrom([]string{"", "a", "b", "ab"}).Draw(t, "tenant"),
			FlowID:    rapid.SampledFrom([]string{"", "f1", "f2"}).Draw(t, "flow"),
			Agent:     rapid.SampledFrom([]string{"", "a1", "a2"}).Draw(t, "agent"),
			Principal: rapid.SampledFrom([]any{nil, "p1", "p2", botPrincipal{"p1"}}).Draw(t, "principal"),
		}
	})
}

// genBase draws the base authorizer: none, a random GrantTable, or one that
// denies everything.
func genBase(t *rapid.T) Authorizer {
	switch rapid.IntRange(0, 2).Draw(t, "base kind") {
	case 0:
		return nil
	case 1:
		g := NewGrantTable()
		for _, subject := range []string{"p1", TenantSubject("a")} {
			globs := rapid.SliceOfN(rapid.StringOfN(rapid.RuneFrom([]rune("ab*?")), 1, 3, -1), 0, 2).Draw(t, "grants of "+subject)
			if err := g.Grant(subject, globs...); err != nil {
				t.Fatal(err)
			}
		}
		return g
	default:
		return AuthorizerFunc(func(context.Context, Request) error { return ErrCapabilityDenied })
	}
}

// withPolicy returns p plus q attached at scope ("app", a flow or an agent
// key), without touching p.
func withPolicy(p Policies, scope string, q Policy) Policies {
	out := Policies{App: append([]Policy(nil), p.App...), Flow: maps.Clone(p.Flow), Agent: maps.Clone(p.Agent)}
	switch scope {
	case "app":
		out.App = append(out.App, q)
	case "f1", "f2":
		if out.Flow == nil {
			out.Flow = map[string][]Policy{}
		}
		out.Flow[scope] = append(append([]Policy(nil), out.Flow[scope]...), q)
	default:
		if out.Agent == nil {
			out.Agent = map[string][]Policy{}
		}
		out.Agent[scope] = append(append([]Policy(nil), out.Agent[scope]...), q)
	}
	return out
}

// TestPropertyAddingAPolicyNeverAllows: for random bases, policies and
// requests, attaching one more policy anywhere never turns a denial into an
// allowance.
func TestPropertyAddingAPolicyNeverAllows(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := genBase(t)
		p := genPolicies().Draw(t, "policies")
		q := genPolicy().Draw(t, "added")
		scope := rapid.SampledFrom([]string{"app", "f1", "f2", "a1", "a2"}).Draw(t, "scope")
		before, err := NewPolicyAuthorizer(base, p)
		if err != nil {
			t.Fatal(err)
		}
		after, err := NewPolicyAuthorizer(base, withPolicy(p, scope, q))
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range rapid.SliceOfN(genRequest(), 1, 8).Draw(t, "requests") {
			if before.Authorize(context.Background(), req) != nil && after.Authorize(context.Background(), req) == nil {
				t.Fatalf("adding %+v at %s turned a denial of %+v into an allowance", q, scope, req)
			}
		}
	})
}

// TestPropertyPoliciesNeverWidenTheBase: whatever the policies, a request
// the base denies stays denied, and one it allows is allowed only if every
// applicable policy allows it alone.
func TestPropertyPoliciesNeverWidenTheBase(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := genBase(t)
		p := genPolicies().Draw(t, "policies")
		a, err := NewPolicyAuthorizer(base, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range rapid.SliceOfN(genRequest(), 1, 8).Draw(t, "requests") {
			got := a.Authorize(context.Background(), req) == nil
			want := base == nil || base.Authorize(context.Background(), req) == nil
			for _, q := range append(append(append([]Policy(nil), p.App...), p.Flow[req.FlowID]...), p.Agent[req.Agent]...) {
				alone, err := NewPolicyAuthorizer(nil, Policies{App: []Policy{q}})
				if err != nil {
					t.Fatal(err)
				}
				want = want && alone.Authorize(context.Background(), req) == nil
			}
			if got != want {
				t.Fatalf("Authorize(%+v) allowed = %v, want %v (base AND each applicable policy)", req, got, want)
			}
		}
	})
}
