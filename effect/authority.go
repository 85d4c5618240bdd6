package effect

import (
	"context"
	"errors"
	"strconv"
	"strings"
)

// Request is what an Authorizer decides on: one invocation of one effect
// (architecture §5.2, K2). The runtime builds it from the step's Context
// before the middleware chain runs.
type Request struct {
	ToolID      string // the effect's registered tool id
	ExecutionID string
	FlowID      string // the flow the step belongs to
	StepID      string
	Tenant      string // on whose behalf; "" when the app is not multi-tenant
	Agent       string // the agent running the flow; "" when none
	// Principal is the identity the execution was started under
	// (loom.WithPrincipal on Start, as recorded). The authorizers of this
	// package read its id (see PrincipalIdentity) and never put it in an
	// error message.
	Principal any
	// Approver is the principal a ResumeAuthenticator verified for the
	// latest gate answer before this step, nil when none: a policy may
	// require one.
	Approver any
}

// Authorizer is the capability ring (K2): it decides whether one effect
// invocation may run. A nil error allows it; any error denies it, and the
// runtime then records EFFECT_DENIED and fails the step with the error
// without running the effect. An Authorizer must be safe for concurrent use
// and, because replay never re-asks it (a completed effect is served from
// the log), it need not be deterministic.
//
// Authorizers in this package return a *CapabilityDeniedError; a foreign one
// may return any error, and a PolicyAuthorizer wraps it in one.
type Authorizer interface {
	Authorize(ctx context.Context, req Request) error
}

// AuthorizerFunc adapts a function to an Authorizer.
type AuthorizerFunc func(ctx context.Context, req Request) error

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, req Request) error { return f(ctx, req) }

// ErrCapabilityDenied is matched (errors.Is) by every *CapabilityDeniedError.
var ErrCapabilityDenied = errors.New("effect: capability denied")

// The values of CapabilityDeniedError.By for this package's authorities. A
// policy's denial is attributed to ByPolicyPrefix followed by its name.
const (
	ByGrants       = "grants" // a GrantTable
	ByBase         = "base"   // a PolicyAuthorizer's base that returned a foreign error
	ByPolicyPrefix = "policy:"
)

// CapabilityDeniedError is an authorizer's refusal of one effect invocation:
// the step fails with it and the effect never runs. Its message names the
// tool, the step, the authority that denied (By) and why (Reason, which for
// a policy includes the rule that matched); it never includes the request's
// principal or tenant.
type CapabilityDeniedError struct {
	ToolID string
	StepID string
	Reason string
	// By is the authority that denied: ByGrants, ByBase, or ByPolicyPrefix
	// plus the policy's name.
	By string
	// Err is the foreign base authorizer's own error when By is ByBase
	// (reachable with errors.Is/As through Unwrap); nil otherwise.
	Err error
}

func (e *CapabilityDeniedError) Error() string {
	var b strings.Builder
	b.WriteString("effect: tool ")
	b.WriteString(strconv.Quote(e.ToolID))
	if e.StepID != "" {
		b.WriteString(" at step ")
		b.WriteString(strconv.Quote(e.StepID))
	}
	b.WriteString(" denied by ")
	b.WriteString(e.By)
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrCapabilityDenied) true.
func (e *CapabilityDeniedError) Is(target error) bool { return target == ErrCapabilityDenied }

// Unwrap returns the foreign base authorizer's error, if any.
func (e *CapabilityDeniedError) Unwrap() error { return e.Err }

// PrincipalIdentity is how a structured principal names itself to a
// GrantTable. A string principal is its own id.
type PrincipalIdentity interface {
	PrincipalID() string
}

// TenantPrefix starts a GrantTable subject that names a tenant rather than a
// principal: "tenant:acme" is every request whose Tenant is "acme".
const TenantPrefix = "tenant:"

// TenantSubject returns the GrantTable subject of tenant.
func TenantSubject(tenant string) string { return TenantPrefix + tenant }

// subjectsOf returns the GrantTable subjects a request speaks for: the
// principal's id, then TenantSubject(req.Tenant). A principal id that is
// empty or starts with TenantPrefix is ignored, so a principal can never
// pass for a tenant; a principal that is neither a string nor a
// PrincipalIdentity has no id.
func subjectsOf(req Request) []string {
	out := make([]string, 0, 2)
	var id string
	switch p := req.Principal.(type) {
	case string:
		id = p
	case PrincipalIdentity:
		id = p.PrincipalID()
	}
	if id != "" && !strings.HasPrefix(id, TenantPrefix) {
		out = append(out, id)
	}
	if req.Tenant != "" {
		out = append(out, TenantSubject(req.Tenant))
	}
	return out
}
