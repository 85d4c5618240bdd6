package effect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/event"
)

// ErrInvalidPolicy is matched (errors.Is) by every refusal of
// NewPolicyAuthorizer: a policy without a valid name, an empty flow or agent
// key, or a rule with an invalid pattern (which also matches
// ErrInvalidPattern and unwraps to its *PatternError).
var ErrInvalidPolicy = errors.New("effect: invalid policy")

// Rule matches a request by glob patterns (Glob syntax: '*' any run, '?' one
// character). An empty field matches any value, the empty one included; a
// Rule with every field empty matches every request.
type Rule struct {
	Effect string // on Request.ToolID
	Tenant string // on Request.Tenant ("" when the request has none)
	Step   string // on Request.StepID
}

// Policy is a declarative allow/deny list (the spec's policy$). It denies a
// request if any Deny rule matches it (deny wins); else, if it has Allow
// rules, it denies a request that matches none of them; else it allows. A
// policy with no rules allows everything.
type Policy struct {
	Name  string // names the policy in denials; required
	Allow []Rule
	Deny  []Rule
}

// Policies are attached at three scopes: App applies to every request, Flow
// to the requests whose FlowID is the key, Agent to those whose Agent is
// the key. Every policy that applies must allow a request.
type Policies struct {
	App   []Policy
	Flow  map[string][]Policy
	Agent map[string][]Policy
}

// PolicyAuthorizer enforces Policies under an optional base Authorizer
// (typically a GrantTable). It allows a request iff the base (when not nil)
// allows it AND every App policy, every policy of Flow[req.FlowID] and every
// policy of Agent[req.Agent] allows it. A policy can therefore tighten what
// the base grants and never widen it: no Allow rule makes a base denial
// pass. With no base and no policies it allows everything (the permissive
// default of an unwired ring).
//
// It is immutable once built and safe for concurrent use; it copies the
// Policies it was given.
type PolicyAuthorizer struct {
	base  Authorizer
	app   []compiledPolicy
	flow  map[string][]compiledPolicy
	agent map[string][]compiledPolicy
}

// NewPolicyAuthorizer validates and compiles p over base (nil for none). It
// refuses, wrapping ErrInvalidPolicy and naming where: a policy whose Name
// is not a valid id (empty, over event.MaxIDBytes, not UTF-8, or with a
// control character), an empty Flow or Agent key, and a rule pattern that
// CompileGlob refuses (also a *PatternError). Which error is reported when
// several are wrong does not depend on map order.
func NewPolicyAuthorizer(base Authorizer, p Policies) (*PolicyAuthorizer, error) {
	a := &PolicyAuthorizer{base: base}
	var err error
	if a.app, err = compilePolicies("app", p.App); err != nil {
		return nil, err
	}
	if a.flow, err = compileScoped("flow", p.Flow); err != nil {
		return nil, err
	}
	if a.agent, err = compileScoped("agent", p.Agent); err != nil {
		return nil, err
	}
	return a, nil
}

// Authorize asks the base first: a *CapabilityDeniedError from it is
// returned unchanged, any other error is wrapped in one with By ByBase and
// the base's error as Err (its text is carried verbatim, so a foreign base
// must keep principals out of it). Then the App, Flow[req.FlowID] and
// Agent[req.Agent] policies are checked in that order, each in the order
// given, and the first denial is returned: By is ByPolicyPrefix+name and
// Reason names the scope and the rule that matched (or that no Allow rule
// did), never the principal or the tenant.
func (a *PolicyAuthorizer) Authorize(ctx context.Context, req Request) error {
	if a.base != nil {
		if err := a.base.Authorize(ctx, req); err != nil {
			var de *CapabilityDeniedError
			if errors.As(err, &de) {
				return err
			}
			return &CapabilityDeniedError{ToolID: req.ToolID, StepID: req.StepID, By: ByBase,
				Reason: "the base authorizer denied: " + err.Error(), Err: err}
		}
	}
	flow, agent := a.flow[req.FlowID], a.agent[req.Agent]
	if len(a.app)+len(flow)+len(agent) == 0 {
		return nil
	}
	s := subject{tool: decode(req.ToolID), tenant: decode(req.Tenant), step: decode(req.StepID)}
	for _, set := range [...][]compiledPolicy{a.app, flow, agent} {
		for i := range set {
			if reason, denied := set[i].verdict(s); denied {
				return &CapabilityDeniedError{ToolID: req.ToolID, StepID: req.StepID,
					By: ByPolicyPrefix + set[i].name, Reason: set[i].scope + " policy: " + reason}
			}
		}
	}
	return nil
}

// subject is a request's matched fields, decoded once for every rule.
type subject struct{ tool, tenant, step []rune }

type compiledPolicy struct {
	name, scope string
	allow, deny []compiledRule
}

// verdict is the policy's pure decision on s: deny wins, then a non-empty
// allow list must match.
func (p *compiledPolicy) verdict(s subject) (reason string, denied bool) {
	for i := range p.deny {
		if p.deny[i].match(s) {
			return "Deny[" + strconv.Itoa(i) + "] " + p.deny[i].describe() + " matched", true
		}
	}
	if len(p.allow) == 0 {
		return "", false
	}
	for i := range p.allow {
		if p.allow[i].match(s) {
			return "", false
		}
	}
	return "no Allow rule matched (of " + strconv.Itoa(len(p.allow)) + ")", true
}

// compiledRule holds a Rule's globs; a nil glob is an empty field (any).
type compiledRule struct {
	src                  Rule
	effect, tenant, step *Glob
}

func (r *compiledRule) match(s subject) bool {
	return (r.effect == nil || r.effect.match(s.tool)) &&
		(r.tenant == nil || r.tenant.match(s.tenant)) &&
		(r.step == nil || r.step.match(s.step))
}

// describe renders the rule's non-empty fields for a denial message.
func (r *compiledRule) describe() string {
	var parts []string
	for _, f := range [...]struct{ name, pattern string }{
		{"effect", r.src.Effect}, {"tenant", r.src.Tenant}, {"step", r.src.Step},
	} {
		if f.pattern != "" {
			parts = append(parts, f.name+" "+strconv.Quote(f.pattern))
		}
	}
	if len(parts) == 0 {
		return "{any}"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// compileScoped compiles a keyed scope (Flow or Agent) in key order.
func compileScoped(kind string, m map[string][]Policy) (map[string][]compiledPolicy, error) {
	if len(m) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(m))
	for k := range m { //loom:sorted keys are sorted before use, so the reported error is stable
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string][]compiledPolicy, len(m))
	for _, k := range keys {
		if k == "" {
			return nil, fmt.Errorf("%w: empty %s key", ErrInvalidPolicy, kind)
		}
		ps, err := compilePolicies(kind+" "+strconv.Quote(k), m[k])
		if err != nil {
			return nil, err
		}
		out[k] = ps
	}
	return out, nil
}

func compilePolicies(scope string, ps []Policy) ([]compiledPolicy, error) {
	out := make([]compiledPolicy, 0, len(ps))
	for i, p := range ps {
		if err := event.ValidateID("policy name", p.Name); err != nil {
			return nil, fmt.Errorf("%w: %s policy #%d: %w", ErrInvalidPolicy, scope, i, err)
		}
		where := scope + " policy " + strconv.Quote(p.Name)
		cp := compiledPolicy{name: p.Name, scope: scope}
		var err error
		if cp.allow, err = compileRules(where, "Allow", p.Allow); err != nil {
			return nil, err
		}
		if cp.deny, err = compileRules(where, "Deny", p.Deny); err != nil {
			return nil, err
		}
		out = append(out, cp)
	}
	return out, nil
}

func compileRules(where, list string, rules []Rule) ([]compiledRule, error) {
	out := make([]compiledRule, len(rules))
	for i, r := range rules {
		out[i].src = r
		for _, f := range [...]struct {
			name    string
			pattern string
			dst     **Glob
		}{
			{"Effect", r.Effect, &out[i].effect}, {"Tenant", r.Tenant, &out[i].tenant}, {"Step", r.Step, &out[i].step},
		} {
			if f.pattern == "" {
				continue
			}
			g, err := CompileGlob(f.pattern)
			if err != nil {
				return nil, fmt.Errorf("%w: %s %s[%d].%s: %w", ErrInvalidPolicy, where, list, i, f.name, err)
			}
			*f.dst = &g
		}
	}
	return out, nil
}
