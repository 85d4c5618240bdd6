// Package divergence is the replay-divergence detector (ADR 0113), pure:
// it compares the step ids a re-run of a flow issues with the order their
// frames were created in the log, and describes the first place they part.
// Outside Parallel the order is strict; the steps of a Parallel block may
// interleave in any order, so a block is matched as a set when it ends.
// Past the recorded prefix every step is new work and never diverges; a
// reused step id is served its first outcome and never diverges either.
//
// A Detector reads nothing but the state it was built from and the ids it
// is fed. It is not safe for concurrent use: the runtime feeds it under its
// drive's lock.
package divergence
