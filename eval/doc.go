// Package eval is replay-as-fixture evaluation: a recorded execution
// becomes an eval case, a suite of cases runs as real executions of a
// flow, graders score every outcome, and two reports compare into a list
// of regressions.
//
//   - CaseFromLog and SuiteFromLogs turn logs read from a store into cases:
//     the recorded input, the gate answers in the order they were given, and
//     the recorded output as the expected value.
//   - DiffRuns compares two executions structurally: steps by step id,
//     decisions by id, gates in the order reached with their answers, the
//     final status and output, and the model usage recorded as
//     RESOURCE_METERED. Event ids, timestamps and sequences are ignored.
//   - Run runs a Suite on a Runtime it builds from a loom.Config (memory
//     stores unless the config names others): each case is started under
//     a deterministic execution id, answered at every gate it parks on,
//     and graded once it ends. The graders are Exact (JSON equality),
//     Regex, JSONSchema and LLMJudge, or any type with the Grader methods.
//   - Compare flags what got worse between a baseline and a candidate
//     Report beyond Thresholds: a case that stopped passing, a score that
//     dropped, a grader's pass rate or mean score that fell, a cost that rose.
//   - ParseSuiteFile reads the JSON suite file format strictly, and RunMain
//     (Main in a binary) is the `eval run` / `eval compare` command an app
//     embeds, since only the app can register its flows.
//
// Determinism: a report holds no timestamps, no durations and no random
// ids, so two runs of a suite over the same code and the same recorded
// model answers (an llm.Cassette) give byte-identical report files — with
// a fixed Config.Clock when the flow puts loom.Now in its output. The
// LLM judge makes its model call as a durable step (llm.Complete) of a
// judging flow run on the suite's runtime: the judge's answer is recorded
// in that execution's log, and with a cassette provider it is the same on
// every run. Elapsed milliseconds are metered by the kernel but never
// reported, since they differ on every run.
//
// Limits: a suite holds at most MaxCases cases and MaxGraders graders, a
// case is answered at most MaxAnswers times, a suite file is at most
// MaxSuiteFileBytes. Run refuses a suite past them before anything runs.
//
// Failures: a case whose flow fails, parks on a gate its case has no
// answer for, completes without reaching a gate it answers, or cannot
// start, is recorded in its CaseResult (Error), graded as it ended, and
// does not pass; Run itself fails only when the runtime cannot be
// built or ctx ends. A grader that cannot grade (a judge whose model call
// fails) gives a failing Grade whose Reason says why; it never passes.
package eval
