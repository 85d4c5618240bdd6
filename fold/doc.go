// Package fold is the only definition of an execution's state: a pure,
// deterministic left fold of its event log (spec §1 P2, §4).
//
// Apply(state, event) reads nothing but its arguments — no clock, no
// randomness, no environment, no map iteration order — so the same events
// give the same bytes (Encode) on every machine. It is copy-on-write: a State
// handed to a caller is never mutated. Fold and Folder copy each container at
// most once per pass, so folding is linear in the log.
//
// The handlers follow spec §4 and EVENT_SCHEMA 1.26.0: only execution-level
// events move the status; a STEP_FAILED never fails the execution and, while
// parked, marks _failedWhileParked; a null resume that answers no suspend
// point is status-only; decisions keep the sequence of their first record;
// stamped flow emits are counted per digest; settled frames drop their
// input; Wave 2 kinds fold only from kernel-stamped envelopes; unknown types
// are inert; a __proto__ container key is refused. docs/events.md lists every
// payload shape. NormalizeSnapshot reads snapshots of older folds.
//
// Payloads are decoded exactly (event.UnmarshalExact), as any other
// language reads them: a member spelled in another case is unknown and
// ignored; a payload with a member name repeated, invalid UTF-8 or a lone
// surrogate escape is malformed: a step, decision or fact event carrying it
// is inert, an execution-level event moves the status with its fields
// absent. A repeat inside a value the fold only carries (an input, an
// output) is kept as recorded. FoldChecked and Folder.ApplyChecked also
// refuse a log whose sequences are not contiguous (*SequenceGapError).
//
// The fold vectors in testdata/vectors (events in, canonical state out) are
// the cross-language check of this package.
package fold
