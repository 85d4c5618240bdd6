package agent

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

// Approval decisions.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
	DecisionEdit    = "edit"
)

// Answer is what an approver sends to a call's approval gate: approve it,
// reject it (with a reason the model is told), or edit its arguments (which
// must match the tool's schema). By is the approver's own account of who
// they are; the verified principal comes from the ResumeAuthenticator.
type Answer struct {
	Decision  string          `json:"decision"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	By        string          `json:"by,omitempty"`
}

// ApprovalRecord is an approval as the tool-call log keeps it: the gate it
// was asked on, the digest of the call the approver saw, the answer, and
// the principal a ResumeAuthenticator verified (absent without one).
type ApprovalRecord struct {
	Gate      string          `json:"gate"`
	Digest    string          `json:"digest"`
	Decision  string          `json:"decision"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	By        string          `json:"by,omitempty"`
	Principal json.RawMessage `json:"principal,omitempty"`
}

// ApprovalRequestEvent is the event type announcing a call waiting for
// approval, recorded just before the run parks on its gate.
const ApprovalRequestEvent = "agent.approval.requested"

// ApprovalRequest is what an approver is shown: the exact call, its digest
// and the gate that only an answer for that call can open.
type ApprovalRequest struct {
	Agent     string          `json:"agent"`
	Gate      string          `json:"gate"`
	Digest    string          `json:"digest"`
	StepID    string          `json:"stepId"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// GatePrefix is the prefix of every approval gate: the gate of a call of
// tool T is "approve.T:<hex digest of the call>".
const GatePrefix = "approve."

// CallDigest is the identity of a call an approver sees: the SHA-256 of the
// canonical JSON of {agent, stepId, tool, arguments}. The gate is named
// after it, so an answer binds to the exact call (ADR 0117): an answer for
// another call — a stale screen, a forked run whose model asked for
// something else — names another gate and is refused with nothing appended.
func CallDigest(agent, stepID, tool string, args json.RawMessage) (string, error) {
	raw, err := json.Marshal(struct {
		Agent     string          `json:"agent"`
		StepID    string          `json:"stepId"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}{agent, stepID, tool, args})
	if err != nil {
		return "", err
	}
	canon, err := event.Canonical(raw)
	if err != nil {
		return "", err
	}
	return event.SHA256(canon), nil
}

// GateFor is the approval gate of a call with digest.
func GateFor(tool, digest string) string {
	return GatePrefix + tool + ":" + strings.TrimPrefix(digest, "sha256:")
}

// approve asks for the call's approval and waits for it: it announces the
// call (ApprovalRequestEvent), parks on the call's gate, and records the
// answer with the principal verified for it.
func (a *run) approve(p *pending) (ApprovalRecord, error) {
	digest, err := CallDigest(a.cfg.ID, p.entry.StepID, p.tool.name, p.args)
	if err != nil {
		return ApprovalRecord{}, fmt.Errorf("agent %q: digesting call %s: %w", a.cfg.ID, p.entry.StepID, err)
	}
	gate := GateFor(p.tool.name, digest)
	if err := a.ctx.Emit(ApprovalRequestEvent, ApprovalRequest{Agent: a.cfg.ID, Gate: gate, Digest: digest,
		StepID: p.entry.StepID, Tool: p.tool.name, Arguments: p.args}); err != nil {
		return ApprovalRecord{}, err
	}
	var opts []loom.SuspendOption
	if a.cfg.ApprovalTimeout > 0 {
		opts = append(opts, loom.Timeout(a.cfg.ApprovalTimeout))
	}
	ans, err := loom.Suspend[Answer](a.ctx, gate, opts...)
	if err != nil {
		return ApprovalRecord{}, err
	}
	rec := ApprovalRecord{Gate: gate, Digest: digest, Decision: ans.Decision, Arguments: ans.Arguments, Reason: ans.Reason,
		By: ans.By, Principal: a.ctx.Approver(gate)}
	switch ans.Decision {
	case DecisionApprove, DecisionReject:
	case DecisionEdit:
		// The gate's schema checked the edit against the tool's schema;
		// parse it the same way the model's arguments are.
		args, err := p.tool.validate(ans.Arguments)
		if err != nil {
			return ApprovalRecord{}, fmt.Errorf("agent %q: the edited arguments of %s: %w", a.cfg.ID, p.entry.StepID, err)
		}
		rec.Arguments = args
	case "": // the timer answered an unanswered gate ({"wakeAt": …})
		rec.Decision, rec.Reason = DecisionReject, "the approval timed out"
	default:
		return ApprovalRecord{}, fmt.Errorf("agent %q: the answer to %s has decision %q; declare agent.FlowOptions on the flow so such an answer is refused before it is recorded",
			a.cfg.ID, gate, ans.Decision)
	}
	return rec, nil
}

// answerSchema is an approval gate's resume schema for a tool whose
// arguments match argsSchema.
func answerSchema(argsSchema json.RawMessage) string {
	return `{"type":"object","required":["decision"],"additionalProperties":false,"properties":{` +
		`"decision":{"enum":["approve","reject","edit"]},"arguments":` + string(argsSchema) +
		`,"reason":{"type":"string","maxLength":2000},"by":{"type":"string","maxLength":200}},` +
		`"if":{"properties":{"decision":{"const":"edit"}}},"then":{"required":["arguments"]},` +
		`"else":{"not":{"required":["arguments"]}}}`
}

// FlowOptions declares, for each tool of cfg that needs approval, the
// resume schema of its approval gates: pass them to loom.NewFlow. Without
// them a gate still binds to its call, but an answer's shape is checked only
// after it is recorded.
func FlowOptions(cfg Config) []loom.FlowOption {
	var opts []loom.FlowOption
	names := make([]string, 0, len(cfg.Tools))
	byName := map[string]*Tool{}
	for _, t := range cfg.Tools {
		if t != nil && t.approval {
			names = append(names, t.name)
			byName[t.name] = t
		}
	}
	sort.Strings(names)
	for _, n := range names {
		opts = append(opts, loom.WithResumeSchema(GatePrefix+n+":*", answerSchema(byName[n].schemaJSON)))
	}
	return opts
}
