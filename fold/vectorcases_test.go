package fold

import "github.com/loom-kernel/loom/event"

// vectorCase is the Go source of one fold vector: the files under
// testdata/vectors are generated from these with -update and then read back
// as the authority, by this and any other implementation.
type vectorCase struct {
	name, rule string
	log        *logBuilder
}

func vectorCases() []vectorCase {
	L := newLog
	return []vectorCase{
		{"01-start", "EXECUTION_STARTED opens a pending execution: running, _input, pins",
			L().add(event.ExecutionStarted, `{"input":{"b":2,"a":1},"flowHash":"sha256:ab","codeHash":"c1","principal":{"sub":"ann"}}`)},
		{"02-complete", "a completed step and a completed execution",
			L().started().add(event.StepStarted, `{"stepId":"fetch","input":{"url":"x"},"kind":"tool","toolId":"http.get"}`).
				add(event.StepCompleted, `{"stepId":"fetch","output":{"status":200}}`).
				add(event.ExecutionCompleted, `{"output":{"ok":true}}`)},
		{"03-step-failed-is-caught", "§4 STEP_FAILED never fails the execution (1.21.0)",
			L().started().add(event.StepStarted, `{"stepId":"charge"}`).
				add(event.StepFailed, `{"stepId":"charge","error":{"message":"declined"}}`)},
		{"04-execution-failed", "§4 only EXECUTION_FAILED fails the execution",
			L().started().add(event.ExecutionFailed, `{"error":{"message":"boom"}}`)},
		{"05-typed-failure", "§4.1 a typed failure folds errorChannel/errorPayload (1.17.0)",
			L().started().add(event.StepStarted, `{"stepId":"parse","input":1}`).
				add(event.StepFailed, `{"stepId":"parse","error":{"message":"drift"},"channel":"schemaDrift","payload":{"field":"x"}}`)},
		{"06-settled-frames-drop-input", "1.26.0 settled frames drop input; a retrying frame keeps it",
			L().started().add(event.StepStarted, `{"stepId":"a","input":1}`).add(event.StepStarted, `{"stepId":"b","input":2}`).
				add(event.StepStarted, `{"stepId":"c","input":3}`).add(event.StepStarted, `{"stepId":"d","input":4}`).
				add(event.StepCompleted, `{"stepId":"a","output":10}`).add(event.StepFailed, `{"stepId":"b","error":"x"}`).
				add(event.StepCancelled, `{"stepId":"c"}`).add(event.StepRetrying, `{"stepId":"d","attempt":2,"error":"timeout"}`)},
		{"07-retry-then-complete", "attempts count re-starts of one step id",
			L().started().add(event.StepStarted, `{"stepId":"s","input":1}`).add(event.StepRetrying, `{"stepId":"s","attempt":2}`).
				add(event.StepStarted, `{"stepId":"s","input":1,"attempt":2}`).add(event.StepCompleted, `{"stepId":"s","output":"done"}`)},
		{"08-suspend-resume", "a gate answer is one passthrough in _resumePayloads; the park ends",
			L().started().add(event.ExecutionSuspended, `{"on":"approve","timeoutMs":60000,"wakeAt":61000,"correlationKey":"inc-7"}`).
				add(event.ExecutionResumed, `{"eventType":"approve","payload":{"approved":true}}`)},
		{"09-resume-payloads-ordered", "1.16.0 _resumePayloads is an ordered list",
			L().started().add(event.ExecutionSuspended, `{"on":"a"}`).add(event.ExecutionResumed, `{"eventType":"a","payload":1}`).
				add(event.ExecutionSuspended, `{"on":"b"}`).add(event.ExecutionResumed, `{"eventType":"b","payload":2}`)},
		{"10-failed-while-parked", "§4 a STEP_FAILED while suspended sets _failedWhileParked and keeps the park",
			parkedWithSiblingFailure()},
		{"11-parked-failure-cleared-by-answer", "§4 the resume that ends the park removes _failedWhileParked",
			parkedWithSiblingFailure().add(event.ExecutionResumed, `{"eventType":"approve","payload":"yes"}`)},
		{"12-null-resume-after-parked-failure", "§4 a null resume while _failedWhileParked is status-only",
			parkedWithSiblingFailure().add(event.ExecutionResumed, `null`)},
		{"13-null-resume-onto-terminal", "1.20.0 resumeAs onto a terminal execution: null resume, status only",
			L().started().add(event.ExecutionFailed, `{"error":"x"}`).add(event.ExecutionResumed, `null`)},
		{"14-null-resume-in-doubt-gate", "1.20.0 a null resume of the in-doubt park is status-only",
			L().started().add(event.StepStarted, `{"stepId":"pay","attempt":1}`).add(event.EffectInDoubt, `{"stepId":"pay","attempt":1}`).
				add(event.ExecutionSuspended, `{"on":"__loom_indoubt__","stepId":"pay","attempt":1}`).
				add(event.DecisionRecorded, `{"decisionId":"__loom_verdict:pay#1","choice":"done"}`).add(event.ExecutionResumed, `null`)},
		{"15-null-resume-diverged-gate", "1.23.0 a null resume of __loom_diverged__ is status-only",
			L().started().add(event.ExecutionSuspended, `{"on":"__loom_diverged__"}`).add(event.ExecutionResumed, `null`)},
		{"16-null-answer-ordinary-gate", "a null answer to an ordinary parked gate is a passthrough",
			L().started().add(event.ExecutionSuspended, `{"on":"approve"}`).add(event.ExecutionResumed, `{"eventType":"approve","payload":null}`)},
		{"17-decision-seq", "1.24.0 _decisions entries carry the seq of their first record",
			L().started().add(event.DecisionRecorded, `{"decisionId":"route","choice":"fast","policy":{"name":"p","propensity":0.5}}`).
				add(event.DecisionRecorded, `{"decisionId":"model","choice":"m1","context":{"len":3}}`).
				add(event.DecisionRecorded, `{"decisionId":"route","choice":"fast"}`)},
		{"18-decision-inner-steps-kernel-only", "1.23.0 innerSteps folds only from a kernel-stamped record",
			L().started().add(event.DecisionRecorded, `{"decisionId":"a","choice":1,"innerSteps":["x"]}`).
				kernel(event.DecisionRecorded, `{"decisionId":"b","choice":2,"innerSteps":["y"]}`)},
		{"19-flow-emits", "§3 1.19.0 stamped emits counted per digest, any event type",
			L().started().emit("order.placed", `{"id":1}`, "9a1c0e5f2b3d4c6e").emit("order.placed", `{"id":1}`, "9a1c0e5f2b3d4c6e").
				emit(event.OutcomeRecorded, `{"outcome":1}`, "0000000000000001").add("order.placed", `{"id":1}`)},
		{"20-resources", "§8 _resources accumulates measured dimensions only; invalid amounts ignored",
			L().started().add(event.ResourceMetered, `{"tokens":10,"costUsd":0.25,"ms":12}`).
				add(event.ResourceMetered, `{"tokens":5,"costUsd":0.5,"memBytes":-1,"netBytes":1e16,"custom":{"gpuSec":1.5}}`)},
		{"21-quota-exceeded", "K3 QUOTA_EXCEEDED is kept for admission control",
			L().started().add(event.QuotaExceeded, `{"dimension":"tokens","reason":"budget of 100 tokens spent"}`)},
		{"22-verdicts", "K2/K6/K7 denials and blocks are audit facts; no status change",
			L().started().add(event.EffectDenied, `{"stepId":"rm","reason":"no grant for fs.delete"}`).
				add(event.SafetyBlocked, `{"stepId":"reply","reason":"pii in output"}`).
				add(event.EgressDenied, `{"reason":"host not allowed"}`).add(event.ExecutionDenied, `{"reason":"tenant mismatch"}`)},
		{"23-approvals-outcomes-shredding", "K12 APPROVAL_GRANTED, OUTCOME_RECORDED, K10 PAYLOAD_SHREDDED",
			L().started().add(event.ApprovalGranted, `{"principal":{"sub":"ann"},"gate":"approve"}`).
				add(event.OutcomeRecorded, `{"outcome":{"score":0.9},"recordedBy":{"sub":"eval"},"late":true}`).
				add(event.PayloadShredded, `{"subject":"user-42"}`)},
		{"24-in-doubt", "K9 EFFECT_INDOUBT marks the frame and keeps the fact by step and attempt",
			L().started().add(event.StepStarted, `{"stepId":"pay","attempt":1,"input":{"amount":5}}`).
				add(event.EffectInDoubt, `{"stepId":"pay","attempt":1}`).
				add(event.ExecutionSuspended, `{"on":"__loom_indoubt__","stepId":"pay","attempt":1}`)},
		{"25-migration", "K11.5 1.15.0 EXECUTION_MIGRATED moves the pins and replaces _input",
			L().started().add(event.ExecutionMigrated, `{"toFlowHash":"sha256:cd","toCodeHash":"c2","migratedInput":{"q":2}}`)},
		{"26-unknown-types-inert", "§4 unknown event types are inert (sequence still advances)",
			L().started().add("order.shipped", `{"stepId":"x"}`).kernel("FUTURE_KIND", `{"a":1}`)},
		{"27-proto-keys-rejected", "§4 an event that would create a __proto__ container key is inert",
			L().started().add(event.StepStarted, `{"stepId":"__proto__"}`).
				add(event.DecisionRecorded, `{"decisionId":"__proto__","choice":1}`).
				add(event.ResourceMetered, `{"tokens":1,"custom":{"__proto__":1}}`).emit("x", `{}`, "__proto__")},
		{"28-wave2-unstamped-inert", "1.23.0 Wave 2 kinds without metadata.kernel fold as no-ops",
			L().started().add(event.MessageConsumed, `{"topic":"t","messageId":"m"}`).
				add(event.ParallelCompleted, `{"scopeId":"p","status":"completed","branches":2}`).
				add(event.InboxQuarantined, `{"topic":"t","messageId":"m"}`).
				add(event.ExecutionContinued, `{"nextExecutionId":"ex-2"}`)},
		{"29-wave2-stamped", "1.23.0 kernel-stamped inbox, wait answers, scopes and continue-as-new",
			L().started().add(event.ExecutionSuspended, `{"on":"approve","waits":[{"waitId":"w1","kind":"gate","on":"approve"},{"waitId":"w2","kind":"message","topic":"t"}]}`).
				kernel(event.MessageConsumed, `{"topic":"t","messageId":"m1","waitId":"w2","payload":{"body":"hi"}}`).
				kernel(event.ExecutionResumed, `{"eventType":"approve","payload":true,"waitId":"w1"}`).
				kernel(event.ParallelCompleted, `{"scopeId":"diag","status":"completed","branches":3}`).
				kernel(event.ExecutionContinued, `{"nextExecutionId":"ex-1.1"}`)},
		{"30-quarantine", "1.25.0 _quarantined per topic: released? held*, the delivered head dropped",
			L().started().kernel(event.InboxQuarantined, `{"topic":"t","messageId":"m1"}`).
				kernel(event.InboxQuarantined, `{"topic":"t","messageId":"m2"}`).
				kernel(event.InboxReleased, `{"topic":"t","messageId":"m1","operator":"ops"}`).
				kernel(event.InboxReleased, `{"topic":"t","messageId":"m2","operator":"ops","auto":true}`).
				kernel(event.MessageConsumed, `{"topic":"t","messageId":"m1"}`)},
		{"31-start-carry", "1.23.0 a validated carry seeds _resources and _inbox",
			L().kernel(event.ExecutionStarted, `{"input":{"i":2},"chain":{"id":"c","index":1},"parent":{"executionId":"p"},"carry":{"resources":{"tokens":7},"inbox":{"t":{"consumed":3,"lastMessageId":"m3","seq":9}}}}`)},
		{"32-cancelled", "EXECUTION_CANCELLED ends a park",
			L().started().add(event.ExecutionSuspended, `{"on":"approve"}`).add(event.ExecutionCancelled, `{"reason":"operator"}`)},
		{"33-timer-and-recovery", "TIMER_FIRED and EXECUTION_RECOVERED are counted; recovery moves no status",
			L().started().add(event.ExecutionRecovered, `{"reason":"crash"}`).
				add(event.ExecutionSuspended, `{"on":"sleep","wakeAt":5000}`).add(event.TimerFired, `{"wakeAt":5000}`).
				add(event.ExecutionResumed, `{"eventType":"TIMER_FIRED","payload":{"wakeAt":5000}}`)},
		{"34-events-rehomed", "1.22.0 EVENTS_REHOMED is pure audit into _lifecycle",
			L().started().add(event.EventsRehomed, `{"fromExecutionId":"","count":4}`)},
		{"35-member-names-exact", "member names are exact: another spelling is an unknown member, ignored, and the exact one wins over a look-alike",
			L().started().add(event.DecisionRecorded, `{"DecisionId":"x1","choice":1}`).
				add(event.StepStarted, `{"STEPID":"s1"}`).
				add(event.DecisionRecorded, `{"DecisionId":"x3","decisionId":"x2","choice":2,"Choice":3}`).
				add(event.StepStarted, `{"stepId":"s2","Input":{"a":1},"KIND":"tool","toolId":"http.get"}`).
				add(event.StepStarted, `{"stepId":"s3","input":1}`).
				add(event.StepCompleted, `{"stepId":"s3","Output":{"ok":true}}`).
				add(event.ExecutionCompleted, `{"Output":{"ok":true}}`)},
		{"36-member-names-exact-lifecycle", "an execution-level event moves the status even when a member is misspelled; that member is absent",
			L().started().add(event.ExecutionSuspended, `{"On":"approve","wakeAt":5000}`).
				add(event.ExecutionResumed, `{"EventType":"approve","Payload":{"ok":true}}`).
				add(event.ExecutionMigrated, `{"ToFlowHash":"sha256:cd","toCodeHash":"c2","MigratedInput":{"q":2}}`).
				add(event.ExecutionSuspended, `{"On":"review","wakeAt":6000,"CorrelationKey":"inc-7"}`)},
		{"37-duplicate-member-names", "a member name repeated in a payload object makes it malformed: a step or decision event is inert, an execution-level one has its fields absent; a repeat inside a carried value is kept, read last-wins",
			L().started().add(event.StepStarted, `{"stepId":"a","stepId":"b"}`).
				add(event.StepStarted, `{"stepId":"c","input":1,"input":1}`).
				add(event.DecisionRecorded, `{"decisionId":"d1","decisionId":"d2","choice":1}`).
				add(event.DecisionRecorded, `{"decisionId":"d3","choice":1,"choice":2}`).
				add(event.ResourceMetered, `{"tokens":1,"custom":{"gpu":1,"gpu":2}}`).
				add(event.StepStarted, `{"stepId":"e","input":{"x":1,"x":2}}`).
				add(event.ExecutionCompleted, `{"output":1,"output":2}`)},
		{"38-lone-surrogates", "a lone surrogate escape anywhere in a payload makes it malformed; a surrogate pair is one character",
			L().started().add(event.StepStarted, `{"stepId":"\ud800"}`).
				add(event.StepStarted, `{"stepId":"a","input":{"note":"x\udc00"}}`).
				add(event.DecisionRecorded, `{"decisionId":"d1","choice":"\ude00\ud83d"}`).
				add(event.StepStarted, `{"stepId":"b","\udfff":1}`).
				add(event.StepStarted, `{"stepId":"c","input":"\ud83d\ude00"}`).
				add(event.ExecutionFailed, `{"error":{"message":"\ud800"}}`)},
	}
}
