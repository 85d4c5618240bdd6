package fold

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
)

// Handlers of decisions and of the durable facts the rings record.

type decisionPayload struct {
	DecisionID string          `json:"decisionId"`
	Choice     json.RawMessage `json:"choice"`
	Context    json.RawMessage `json:"context"`
	Policy     json.RawMessage `json:"policy"`
	InnerSteps json.RawMessage `json:"innerSteps"`
}

// DECISION_RECORDED { decisionId, choice, context?, policy?, innerSteps? }
// records a choice under _decisions. The entry's seq is the envelope
// sequence of the FIRST record of that id (1.24.0); a repeat keeps it, and a
// legacy entry without seq stays without. innerSteps is read only from a
// kernel-stamped envelope.
func onDecisionRecorded(f *Folder, e event.Envelope) {
	var p decisionPayload
	if !decode(e, &p) || p.DecisionID == "" || p.DecisionID == ProtoKey {
		return
	}
	d := Decision{Choice: orNull(p.Choice), Context: present(p.Context), Policy: present(p.Policy)}
	if e.Kernel() {
		d.InnerSteps = present(p.InnerSteps)
	}
	if prev, ok := f.s.Variables.Decisions[p.DecisionID]; ok {
		d.Seq = prev.Seq
	} else {
		seq := e.Sequence
		d.Seq = &seq
	}
	f.decisions()[p.DecisionID] = d
}

// TIMER_FIRED { wakeAt }: the kernel's timer resume; counted for audit, the
// answer itself arrives as the EXECUTION_RESUMED beside it.
func onTimerFired(f *Folder, e event.Envelope) {
	f.s.Variables.TimersFired++
}

type meteredPayload struct {
	Tokens   *float64           `json:"tokens"`
	CostUSD  *float64           `json:"costUsd"`
	Ms       *float64           `json:"ms"`
	MemBytes *float64           `json:"memBytes"`
	WallMs   *float64           `json:"wallMs"`
	NetBytes *float64           `json:"netBytes"`
	Custom   map[string]float64 `json:"custom"`
}

// RESOURCE_METERED { tokens?, costUsd?, ms?, memBytes?, wallMs?, netBytes?,
// custom? } adds into the _resources accumulator (spec §8). A dimension
// appears only once measured; a negative, non-finite or over-ceiling amount
// is ignored.
func onResourceMetered(f *Folder, e event.Envelope) {
	var p meteredPayload
	if !decode(e, &p) {
		return
	}
	var r Resources
	if cur := f.s.Variables.Resources; cur != nil {
		r = *cur
	}
	add := func(dst **float64, v *float64) {
		if v == nil || !validAmount(*v) {
			return
		}
		sum := *v
		if *dst != nil {
			sum += **dst
		}
		*dst = &sum
	}
	add(&r.Tokens, p.Tokens)
	add(&r.CostUSD, p.CostUSD)
	add(&r.Ms, p.Ms)
	add(&r.MemBytes, p.MemBytes)
	add(&r.WallMs, p.WallMs)
	add(&r.NetBytes, p.NetBytes)
	if len(p.Custom) > 0 {
		custom := cloneMap(r.Custom)
		for name, v := range p.Custom { //loom:order-independent each key summed on its own
			if name != "" && name != ProtoKey && validAmount(v) {
				custom[name] += v
			}
		}
		if len(custom) > 0 {
			r.Custom = custom
		}
	}
	if r.empty() {
		return
	}
	f.s.Variables.Resources = &r
}

func (r Resources) empty() bool {
	return r.Tokens == nil && r.CostUSD == nil && r.Ms == nil && r.MemBytes == nil &&
		r.WallMs == nil && r.NetBytes == nil && len(r.Custom) == 0
}

type reasonPayload struct {
	StepID    string `json:"stepId"`
	Reason    string `json:"reason"`
	Dimension string `json:"dimension"`
}

// QUOTA_EXCEEDED { dimension?, reason? }: admission control denies the next
// effect while _quotaExceeded is set.
func onQuotaExceeded(f *Folder, e event.Envelope) {
	var p reasonPayload
	if !decode(e, &p) {
		return
	}
	f.s.Variables.Quota = &QuotaFact{Dimension: bounded(p.Dimension), Reason: bounded(p.Reason), Seq: e.Sequence}
}

// EXECUTION_DENIED, EFFECT_DENIED, EGRESS_DENIED, SAFETY_BLOCKED
// { stepId?, reason? } append to _verdicts.
func onVerdict(f *Folder, e event.Envelope) {
	var p reasonPayload
	if !isNull(e.Payload) && !decode(e, &p) {
		return
	}
	v := &f.s.Variables
	v.Verdicts = appendOwned(v.Verdicts, &f.own.verdicts,
		Verdict{Type: e.Type, StepID: bounded(p.StepID), Reason: bounded(p.Reason), Seq: e.Sequence})
}

// bounded cuts s to MaxReasonBytes on a rune boundary.
func bounded(s string) string {
	if len(s) <= MaxReasonBytes {
		return s
	}
	cut := MaxReasonBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

type approvalPayload struct {
	Principal json.RawMessage `json:"principal"`
	Gate      string          `json:"gate"`
}

// APPROVAL_GRANTED { principal, gate }: a ResumeAuthenticator's verdict (K12).
func onApprovalGranted(f *Folder, e event.Envelope) {
	var p approvalPayload
	if !decode(e, &p) {
		return
	}
	v := &f.s.Variables
	v.Approvals = appendOwned(v.Approvals, &f.own.approvals,
		Approval{Principal: present(p.Principal), Gate: bounded(p.Gate), Seq: e.Sequence})
}

type outcomePayload struct {
	Outcome    json.RawMessage `json:"outcome"`
	RecordedBy json.RawMessage `json:"recordedBy"`
	Late       bool            `json:"late"`
}

// OUTCOME_RECORDED { outcome, recordedBy?, late? }.
func onOutcomeRecorded(f *Folder, e event.Envelope) {
	var p outcomePayload
	if !decode(e, &p) {
		return
	}
	v := &f.s.Variables
	v.Outcomes = appendOwned(v.Outcomes, &f.own.outcomes,
		Outcome{Outcome: orNull(p.Outcome), RecordedBy: present(p.RecordedBy), Late: p.Late, Seq: e.Sequence})
}

// PAYLOAD_SHREDDED { subject }: a crypto-shred made a subject's payloads
// unreadable (K10).
func onPayloadShredded(f *Folder, e event.Envelope) {
	var p struct {
		Subject string `json:"subject"`
	}
	if !decode(e, &p) || p.Subject == "" {
		return
	}
	v := &f.s.Variables
	v.Shredded = appendOwned(v.Shredded, &f.own.shredded, Shredding{Subject: bounded(p.Subject), Seq: e.Sequence})
}
