package effect

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrInvalidGrant refuses a grant whose subject is empty or names an empty
// tenant ("tenant:").
var ErrInvalidGrant = errors.New("effect: invalid grant")

// GrantTable is the imperative, least-privilege Authorizer (K2): it allows
// an effect iff one of the request's subjects holds a grant whose tool glob
// matches the request's ToolID. Everything not granted is denied — an empty
// table denies every effect.
//
// A request speaks for at most two subjects:
//   - its principal's id: the string itself for a string principal, or
//     PrincipalID() for a PrincipalIdentity (any other principal has no id,
//     and an id starting with TenantPrefix is ignored, so a principal can
//     never pass for a tenant);
//   - its tenant, as TenantSubject(req.Tenant) = "tenant:<name>", when
//     req.Tenant is not empty.
//
// So Grant("alice", …) grants to the principal "alice" and
// Grant("tenant:acme", …) to every request of tenant acme. Tool globs use
// the Glob syntax ('*' any run, '?' one character). A GrantTable is safe for
// concurrent use; Authorize reads under a shared lock, so grants and
// revocations take effect for every Authorize that starts after they return.
// The zero GrantTable is an empty table, ready to use.
type GrantTable struct {
	mu sync.RWMutex
	// grants maps a subject to its tool globs, keyed by pattern text.
	grants map[string]map[string]Glob
}

// NewGrantTable returns an empty table: until something is granted, it
// denies every effect.
func NewGrantTable() *GrantTable { return &GrantTable{} }

// Grant lets subject (a principal id or TenantSubject(tenant)) run every
// tool whose id matches one of toolGlobs. It is all-or-nothing: an empty or
// malformed subject (ErrInvalidGrant) or any invalid glob (*PatternError,
// ErrInvalidPattern) refuses the whole call and changes nothing. Granting a
// glob the subject already holds is a no-op, as is a call with no globs.
func (t *GrantTable) Grant(subject string, toolGlobs ...string) error {
	if err := validSubject(subject); err != nil {
		return err
	}
	compiled := make([]Glob, 0, len(toolGlobs))
	for _, p := range toolGlobs {
		g, err := CompileGlob(p)
		if err != nil {
			return err
		}
		compiled = append(compiled, g)
	}
	if len(compiled) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.grants == nil {
		t.grants = make(map[string]map[string]Glob)
	}
	held := t.grants[subject]
	if held == nil {
		held = make(map[string]Glob, len(compiled))
		t.grants[subject] = held
	}
	for _, g := range compiled {
		held[g.String()] = g
	}
	return nil
}

// Revoke removes the grant of toolGlob to subject and reports whether there
// was one. It matches the glob's text exactly: revoking "a.*" does not
// remove "a.b", nor "a.**", and narrowing a grant means revoking the wide
// glob and granting the narrow ones.
func (t *GrantTable) Revoke(subject, toolGlob string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	held, ok := t.grants[subject]
	if !ok {
		return false
	}
	if _, ok := held[toolGlob]; !ok {
		return false
	}
	delete(held, toolGlob)
	if len(held) == 0 {
		delete(t.grants, subject)
	}
	return true
}

// Authorize allows req (nil) iff one of its subjects holds a glob that
// matches req.ToolID; otherwise it returns a *CapabilityDeniedError with By
// ByGrants, whose message names neither the principal nor the tenant. It
// never blocks on I/O and ignores ctx. A nil *GrantTable denies everything.
func (t *GrantTable) Authorize(_ context.Context, req Request) error {
	subjects := subjectsOf(req)
	if len(subjects) == 0 {
		return &CapabilityDeniedError{ToolID: req.ToolID, StepID: req.StepID, By: ByGrants,
			Reason: "the request has no principal id and no tenant to hold a grant"}
	}
	if t != nil {
		tool := decode(req.ToolID)
		t.mu.RLock()
		defer t.mu.RUnlock()
		for _, s := range subjects {
			for _, g := range t.grants[s] { //loom:order-independent any match allows; which one is not reported
				if g.match(tool) {
					return nil
				}
			}
		}
	}
	return &CapabilityDeniedError{ToolID: req.ToolID, StepID: req.StepID, By: ByGrants,
		Reason: "no grant to the request's principal or tenant matches the tool"}
}

// validSubject refuses an empty subject and the empty tenant "tenant:".
func validSubject(subject string) error {
	switch subject {
	case "":
		return fmt.Errorf("%w: empty subject", ErrInvalidGrant)
	case TenantPrefix:
		return fmt.Errorf("%w: empty tenant %q", ErrInvalidGrant, subject)
	}
	return nil
}
