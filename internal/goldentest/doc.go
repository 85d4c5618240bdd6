// Package goldentest is the replay harness of the golden histories (STYLE
// rule 12; the files and their format are described in
// testdata/histories/README.md). It is shared by the kernel's
// TestGoldenHistories (golden_test.go) and the example app's
// TestGoldenIncidentHistories (examples/incident/golden_test.go), which keep
// only their flows, their cases and their checks of the bad histories.
//
// What it holds:
//
//   - the file format: Load reads a history in the one strict form Write
//     produces (canonical envelopes, contiguous sequences, one execution) and
//     derives the scenario's caller actions from the log; Claim fails on a
//     file no case replays; Updating reports the -update-histories flag,
//     which this package registers in every test binary that imports it;
//   - the deterministic world a history runs in (NewWorld): memory stores,
//     a clock that moves only to each action's instant, envelope ids
//     ev-0001, ev-0002… continued from the log a process opens;
//   - the drives: Record runs a script, Replay runs a history's actions
//     from a fresh world or from a recorded prefix (a new process at a
//     park or crash point), CheckReplay runs every such mode and compares
//     each log with the file;
//   - Diff, the byte-for-byte comparison with its one relaxation for the
//     interleaving of Parallel branches;
//   - Env, the hooks a golden flow's effects and deciders report to, and
//     CheckCounts, which asserts that what the log served was not run again.
//
// It is a test helper: it calls t.Fatal, registers a command-line flag and
// reads and writes files under testdata. Only _test.go files may import it;
// no package of the module's build graph does (TestOnlyTestsImportIt).
package goldentest
