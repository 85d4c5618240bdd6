// Package store defines the storage SPIs of the kernel: EventStore (the
// append-only, per-execution log), SnapshotStore (checkpoints of folded
// state that bound the replay tail) and BranchRegistry (git-style refs for
// fork/simulate/promote). TimerStore keeps durable wake-ups, and the
// plugin-tier ContentStore keeps the content-addressed blobs the claim-check
// middleware moves out of the log (ADR 0054; the log records only the ref,
// so replay never reads it). ArchiveStore keeps what compaction moved out of
// the logs, and ReadModelStore the rows projections fold the logs into,
// with a watermark per (projection, source) moved by an atomic
// compare-and-set. Each has a version constant pinned by a test to its
// method set.
//
// The required interfaces cover durability only. Optional capabilities —
// range reads, subscriptions, fork copies, deletion, fencing, the index of
// unfinished executions (StatusIndex, which a recovery pass reads instead of
// every execution), snapshot listing and pruning — are small separate
// interfaces a caller finds by type assertion, so a third-party store
// implements only what it can. EventStatus and StatusChangeOf state the
// StatusIndex rule once, for every store that keeps one.
// storetest holds the conformance kits every implementation runs.
package store
