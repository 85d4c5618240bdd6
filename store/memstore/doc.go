// Package memstore holds the in-memory reference implementations of the
// storage SPIs: EventStore (with every optional capability: RangeReader,
// Subscriber, PrefixCopier, ExecutionDeleter, Fencer and StatusIndex), SnapshotStore (with
// SnapshotLister, SnapshotPruner and SnapshotDeleter), BranchRegistry,
// TimerStore, LeaseStore, ContentStore (with ContentDeleter; it trusts
// its memory and does not re-hash on Get), QueueStore, ArchiveStore and
// ReadModelStore.
//
// They are what the kernel's own tests and simulations run on, and they pass
// the storetest conformance kits with no skips, so their behaviour is the
// contract in executable form.
//
// Guarantees:
//   - "Durable" means "applied under the store's lock": an acknowledged
//     append is visible to every later read, but nothing survives the process
//     or Close.
//   - A refused write (invalid batch, sequence conflict, stale fence, ref
//     conflict) changes nothing.
//   - Stores copy what they are given and what they return: a caller may
//     reuse or mutate its slices, maps and byte buffers freely on either side
//     of a call. Payload and metadata bytes come back exactly as appended.
//   - Every method is safe for concurrent use; after Close every method
//     returns store.ErrClosed and open subscriptions end.
//   - Listing is in code-point order (Go string order) from an ordered
//     index: a page costs a binary search plus its own length, and k new
//     executions cost one O(n + k log k) merge at the next listing, never a
//     sort of all n ids per page.
//   - The status index (ListUnfinished) changes with the log under the same
//     lock, and keeps its listed ids in the same kind of ordered index, so
//     a page costs a binary search plus its length, whatever the number of
//     ended executions.
//   - Read models keep, per kind, an ordered index of row ids and an
//     ordered posting list per (field, value), so a Query walks the
//     shortest posting list of its Where from its cursor and never visits
//     a row lacking that pair; Apply and Reset run under the write lock,
//     which decides the compare-and-sets of concurrent Applies one at a
//     time.
//   - Timers sit in a position-tracking min-heap by (WakeAt, Key): Put and
//     Delete cost O(log n), and Due walks the heap without changing it, so
//     a page of k timers costs O(k log k) and never a sort of all n.
package memstore
