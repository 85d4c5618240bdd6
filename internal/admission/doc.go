// Package admission is the resume ingress gate of spec §5 as pure
// functions of (state, resume schemas, event, now): which event may be
// delivered to an execution in which state, and what it answers. It reads
// nothing but its arguments (no clock, no store, no randomness; the caller
// passes now), appends nothing, and never modifies the state it is given.
// The runtime loads the state, calls the function for the resume kind,
// maps a *Refusal onto its typed errors, and commits Admission.Events.
//
// One function per resume kind, one table of rules:
//
//   - Admit: a gate answer, a TIMER_FIRED and an EXECUTION_RECOVERED
//     re-drive (every rule below);
//   - AdmitRedrive: a re-drive alone (rule 2);
//   - AdmitVerdict: an operator's in-doubt verdict (K9.3);
//   - AdmitResumeAs: resumeAs, every rule onto a parked execution, the
//     kernel namespace only (rules 1 and 4) onto a crashed or ended one;
//   - KernelNamespace: rule 1 alone, for the runtime to run before identity.
//
// # Rule order
//
// Admit applies the rules in this order; the first one a resume breaks
// refuses it (Refusal.Rule says which):
//
//  1. Kernel type. A kernel event type (event.IsKnown) other than
//     TIMER_FIRED and EXECUTION_RECOVERED is refused kernel-event-type, in
//     every state: STEP_COMPLETED would forge a step outcome,
//     EXECUTION_MIGRATED the code pin, APPROVAL_GRANTED the authenticator's
//     evidence.
//  2. Re-drive. EXECUTION_RECOVERED is admitted for a running or pending
//     execution and refused not-recoverable on a parked or ended one. It
//     precedes rule 3: a re-drive is not an answer, and a recovery pass
//     racing a park must see the refusal it expects.
//  3. In-doubt park. At a park on fold.GateInDoubt anything that is not a
//     verdict (AdmitVerdict) is refused payload-invalid — a gate answer, a
//     timer, and a resume typed with a reserved name, the in-doubt gate's
//     own name included. It precedes rule 4 so that the reserved name does
//     not hide the answer the caller needs (give a verdict); it follows
//     rule 1 so a genuine kernel type is refused as one whatever the state.
//  4. Reserved namespace. An event type starting with ReservedPrefix
//     ("__loom_") other than fold.GateDiverged is refused kernel-event-type.
//  5. Terminal. An ended execution is refused terminal (ResumeAs re-opens it).
//  6. Parked. A pending or running execution is refused not-suspended: an
//     answer recorded now would answer whatever gate came next.
//  7. Gate. The event type must be the recorded gate, or the gate of one of
//     a Select's waits; TIMER_FIRED must fire exactly the wakeAt the park
//     (or one of its timer waits) recorded, and be due at now. A Select that
//     already has an answer takes no other. Refused gate-mismatch, or
//     timer-not-allowed for a timer. A timer's answer is admitted here, as
//     the canonical {"wakeAt":…}; rules 8 and 9 do not apply to it.
//  8. Null after a parked failure. A null answer while _failedWhileParked
//     is set is refused null-answer-after-parked-failure.
//  9. Shape. A diverged park (fold.GateDiverged) takes only null, since any
//     value would be served to the flow's next gate; the payload must be
//     UTF-8 JSON; a resume schema declared for the event type must parse it,
//     and the PARSED value is what is recorded. Refused payload-invalid.
//
// Identity (the ResumeAuthenticator) runs in the runtime before Admit and
// after KernelNamespace; shape is checked after the gate rules, so a
// schema cannot be evaded by renaming the event and a gate-mismatch names
// the gate only to an authenticated caller.
//
// # Refusals
//
// A *Refusal of Kind Refused becomes loom.ResumeRefusedError with
// RefusalReason(Reason) (the Reason values are the root's strings); Kind
// PayloadInvalid becomes loom.ResumePayloadValidationError with Gate.
// Detail always says what to do instead, and never echoes the payload.
package admission
