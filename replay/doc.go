// Package replay checks stored executions against new flow code before it
// is deployed: the deploy simulation.
//
// The worst deploy of a durable engine is the one that strands or breaks
// the runs already in flight: a renamed step, a reordered one, a new step
// before a gate, a gate that moved. Check replays every in-flight
// execution of a store (and, on request, a sample of ended ones) against
// the candidate flows, each in isolation — its log copied into memory,
// recorded outcomes served, nothing run, nothing written — and reports per
// execution one of the verdicts of loom.ReplayVerdict: compatible;
// diverged at a sequence (what the log has there, what the new code does,
// and the code path); parks differently; code-pin mismatch; unknown flow.
//
//	rep, err := replay.Check(ctx, events, loom.Config{Flows: candidateFlows}, replay.Options{})
//	if err == nil && !rep.OK() {
//		rep.WriteText(os.Stderr) // one line per execution that would break
//	}
//
// In CI, loomtest.ReplayStored runs it as a test. Against a production
// store, build a small check program from the code to deploy, whose main
// is
//
//	func main() { replay.Main(loom.Config{Flows: app.Flows()}) }
//
// and run
//
//	loom deploy check --store prod.db --with ./check [--ended 500] [--json]
//
// loom opens the store read-only and hands the program one log at a time
// over its stdin (Serve's protocol), so the program never holds the store;
// it exits 3 when any execution is not compatible.
//
// A change the log cannot take is made safe with a patch: loom.Version and
// Context.Patched branch new executions onto the new code while old ones
// keep the old path, and the check then finds them compatible (see
// docs/changing-flows.md).
package replay
