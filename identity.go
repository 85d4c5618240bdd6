package loom

import (
	"context"
	"encoding/json"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Identity through the effect ring (K2, K12). The principal that started
// an execution (WithPrincipal on Start's context) is recorded on
// EXECUTION_STARTED; each principal a ResumeAuthenticator verified is
// recorded on APPROVAL_GRANTED. Every effect is authorized as the recorded
// starter, with the latest recorded approver beside it — read from the log,
// so a step that runs live after a resume in another process, or after a
// crash, is authorized exactly as it would have been in the first process.

// Principal is a structured caller identity for WithPrincipal. Recorded as
// {"id", "tenant", "agent"}, it reaches the effect authorizer as a
// Principal (an effect.PrincipalIdentity) with effect.Request.Tenant and
// .Agent filled from it. A plain string principal is its own id. Any other
// value is recorded as its JSON; the authorizer then sees a Principal
// decoded from the members id, tenant and agent (exact names), with Raw
// holding the whole recorded value.
type Principal struct {
	ID     string          `json:"id"`
	Tenant string          `json:"tenant,omitempty"`
	Agent  string          `json:"agent,omitempty"`
	Raw    json.RawMessage `json:"-"`
}

// PrincipalID names the principal to an effect.GrantTable.
func (p Principal) PrincipalID() string { return p.ID }

// callerTenant is the tenant the caller's principal (WithPrincipal on ctx)
// names, "" for none: a Principal's Tenant, or the "tenant" member of
// another value's JSON.
func callerTenant(ctx context.Context) string {
	switch p := principalOf(ctx).(type) {
	case nil, string:
		return ""
	case Principal:
		return p.Tenant
	case *Principal:
		if p == nil {
			return ""
		}
		return p.Tenant
	default:
		raw, err := json.Marshal(p)
		if err != nil {
			return ""
		}
		return identityOf(raw).tenant
	}
}

// identity is a recorded principal as the rings see it.
type identity struct {
	principal any // a string, a Principal, or nil
	tenant    string
	agent     string
}

// identityOf decodes a recorded principal. Absent or null is no identity;
// a JSON string is its own id; an object is read as a Principal.
func identityOf(raw json.RawMessage) identity {
	raw = present(raw)
	if raw == nil {
		return identity{}
	}
	var s string
	if unmarshalRecorded(raw, &s) == nil {
		return identity{principal: s}
	}
	var p Principal
	if unmarshalRecorded(raw, &p) != nil {
		return identity{principal: Principal{Raw: raw}}
	}
	p.Raw = raw
	return identity{principal: p, tenant: p.Tenant, agent: p.Agent}
}

// executionIdentity is the starter's identity and the latest approver of
// the execution st records.
func executionIdentity(st *fold.State) (starter identity, approver any) {
	starter = identityOf(st.Variables.Principal)
	if n := len(st.Variables.Approvals); n > 0 {
		approver = identityOf(st.Variables.Approvals[n-1].Principal).principal
	}
	return starter, approver
}

// present returns raw unless it is absent or JSON null.
func present(raw json.RawMessage) json.RawMessage {
	if isNullJSON(raw) {
		return nil
	}
	return raw
}

// unmarshalRecorded decodes a recorded payload with exact member names.
func unmarshalRecorded(raw json.RawMessage, v any) error {
	return event.UnmarshalExact(raw, v)
}

// Approver returns the principal a ResumeAuthenticator verified for the
// latest answer to gate (recorded on APPROVAL_GRANTED), or nil when none
// was recorded — no authenticator, or the gate not yet answered. It reads
// the log, so a replay returns what the first run saw once the answer is
// recorded; give each approval its own gate name to bind the principal to
// it.
func (c *Context) Approver(gate string) json.RawMessage {
	var p json.RawMessage
	c.state(func(s *fold.State) {
		for i := len(s.Variables.Approvals) - 1; i >= 0; i-- {
			if a := s.Variables.Approvals[i]; a.Gate == gate {
				p = append(json.RawMessage(nil), a.Principal...)
				return
			}
		}
	})
	return p
}
