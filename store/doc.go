// Package store defines the storage SPIs of the kernel: EventStore (the
// append-only, per-execution log), SnapshotStore (checkpoints of folded
// state that bound the replay tail) and BranchRegistry (git-style refs for
// fork/simulate/promote). Each has a version constant pinned by a test to its
// method set.
//
// The required interfaces cover durability only. Optional capabilities —
// range reads, subscriptions, fork copies, deletion, fencing, snapshot
// listing and pruning — are small separate interfaces a caller finds by type
// assertion, so a third-party store implements only what it can.
// storetest holds the conformance kits every implementation runs.
package store
