// Package middleware holds the opt-in rings of the effect boundary
// (architecture §5.2 and §5.7): retry, resource metering and budgets (K3),
// behavioural safety (K6), secret redaction (K10) and the claim check (ADR
// 0054). Each is a function returning an effect.Middleware, wired through
// loom.Config.Middleware, first outermost. None is on by default, and with
// none wired the log is byte-identical to a kernel without the ring (G2).
//
// # Order
//
// The recommended order is the architecture's:
//
//	authorizer (the runtime, K2: Config.EffectAuthorizer, before any middleware)
//	  → Retry → Metering → Safety → Redaction → ClaimCheck → effect
//
//	cfg.Middleware = []effect.Middleware{
//		middleware.Retry(middleware.RetryPolicy{}),
//		middleware.Metering(middleware.Meter{}, middleware.Budget{Tokens: 100_000}),
//		middleware.Safety(validators...),
//		middleware.Redaction(secrets),
//		middleware.ClaimCheck(content, middleware.ClaimCheckOptions{}),
//	}
//
// Retry outermost re-runs everything inside it, so every attempt is
// admitted, metered and validated on its own. Metering outside Safety
// charges a call whose output was blocked: it was spent. Redaction next to
// the effect means validators see the reference, never the secret. Because
// ClaimCheck is innermost, Safety's output validators and Redaction's
// scrubbing see a claimed output's envelope, not its content; when that
// matters, wire ClaimCheck outside them.
//
// # What each records
//
// Every fact is appended through effect.Context.Emit (validated as spec §5
// requires, never stamped), between the step's STEP_STARTED and its
// outcome, and only live: on replay a completed step is served from the log
// and no ring runs.
//
//   - Retry: STEP_RETRYING {stepId, attempt, error: {message}, delayMs} per
//     retry, written by the kernel's Retrying hook; attempt is the attempt
//     about to run, which has its own idempotency key.
//   - Metering: RESOURCE_METERED {stepId, attempt, ms, tokens?, costUsd?,
//     memBytes?, wallMs?, netBytes?, custom?} once per attempt that reached
//     it, ms always, the others only as reported with Report; a denial is
//     QUOTA_EXCEEDED {stepId, dimension, limit, used, reason}.
//   - Safety: SAFETY_BLOCKED {stepId, toolId?, validator, phase, reason},
//     phase "input" or "output"; never the payload.
//   - Redaction: nothing; STEP_STARTED keeps the reference, because the
//     runtime records the input before any middleware runs.
//   - ClaimCheck: nothing of its own; STEP_COMPLETED records the envelope
//     {"$claim":{"ref","size","digest"?}} in place of an over-cap output.
//
// A refusal fails the step with a typed error (*QuotaExceededError,
// *SafetyBlockedError, *SecretError, *ClaimCheckError), recorded as an
// untyped STEP_FAILED; the flow sees a *loom.StepError that unwraps to it.
package middleware
