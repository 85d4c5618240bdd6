// Package storetest holds the conformance kits of the storage SPIs. Every
// implementation — memstore, the SQLite and PostgreSQL plugins, any
// third-party store — runs the same kits, under -race, and is done when they
// pass with no skips.
//
// A third-party store uses a kit from one of its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.RunEventStore(t, storetest.EventStoreFactory{
//			New: func(t *testing.T) store.EventStore {
//				s, err := mystore.Open(filepath.Join(t.TempDir(), "events.db"))
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			},
//			// Reopen is optional: set it when the store is durable.
//			Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
//				s, err := mystore.Open(closed.(*mystore.Store).Path())
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			},
//			MaxPayloadBytes: 0, // the store's payload cap; 0 is event.DefaultMaxPayloadBytes
//		})
//		// When the event store is also a store.StatusIndex:
//		storetest.RunStatusIndex(t, storetest.EventStoreFactory{New: ..., Reopen: ...})
//		storetest.RunSnapshotStore(t, storetest.SnapshotStoreFactory{New: ...})
//		storetest.RunBranchRegistry(t, storetest.BranchRegistryFactory{New: ...})
//		storetest.RunTimerStore(t, storetest.TimerStoreFactory{New: ...})
//		storetest.RunLeaseStore(t, storetest.LeaseStoreFactory{New: ...})
//		storetest.RunContentStore(t, storetest.ContentStoreFactory{New: ...})
//		storetest.RunReadModelStore(t, storetest.ReadModelStoreFactory{New: ..., Reopen: ...})
//	}
//
// Each kit runs named subtests (t.Run) and calls New once per subtest, so
// every subtest starts from an empty store; the kit closes every store it is
// given, and a Close that fails (other than with store.ErrClosed for a store
// already closed) fails the subtest. A subtest that needs an
// optional capability (store.RangeReader, store.Subscriber,
// store.PrefixCopier, store.ExecutionDeleter, store.Fencer,
// store.SnapshotLister, store.SnapshotPruner, store.SnapshotDeleter,
// store.ContentDeleter) calls
// t.Skip naming it when the store lacks it. The Reopen subtests run only when
// the factory sets Reopen; the kit logs that they were left out otherwise.
//
// The contract the kits pin down, beyond the SPI comments:
//   - Payload bytes are returned exactly as appended (whitespace, key order,
//     duplicate keys, escapes and number text such as 12345678901234567890
//     or 1.0, and <>& unescaped). Metadata values keep their text too, but a
//     store may drop insignificant whitespace inside them. Snapshot State is
//     opaque bytes and is returned exactly, binary bytes included.
//   - Every refusal is a typed error (errors.Is and errors.As) and writes
//     nothing: a read-back shows the log unchanged and a valid append at the
//     right sequence still succeeds.
//   - ListExecutions orders ids by code point (UTF-8 byte order, not UTF-16),
//     returns every id exactly once across pages, and Next is "" exactly on
//     the page that holds the last id.
//   - Subscriptions deliver in order with no gap or duplicate, end on
//     Subscription.Close, on the end of their context and on the store's
//     Close, and leave no goroutine behind (checked with goleak once the
//     store is closed, so a store's own goroutines must end with Close).
//   - Content refs are event.SHA256 of the bytes, a duplicate Put stores
//     nothing new, and a malformed ref is simply not found (never a panic,
//     an error of another kind, or a blob it resembles).
//   - Fence tokens are per execution and, for a durable store, survive a
//     reopen: a token acquired before the reopen is stale after a new one.
//   - A StatusIndex lists, in code-point order, exactly the executions whose
//     log the fold leaves pending or running (listed running), suspended,
//     or continued to a successor with no log yet (listed continued), each
//     at its last status-moving event; it changes with every write to the
//     log and not with a refused one, never lists an inbox stream, and
//     agrees with the fold on seeded logs (CheckUnfinished, StatusLogs).
//   - Lease tokens are per execution and strictly increase across every
//     grant, a re-acquisition by the holder and a grant after a Release
//     included, and across a reopen; of owners racing for one lease exactly
//     one wins. Invalid lease input is an *event.InvalidEnvelopeError.
//   - A ReadModelStore's Apply is all or nothing and a compare-and-set on
//     the watermark and on every row it writes: racing writers of one step
//     leave exactly one winner and the state of a sequential run, racing
//     writers of one row lose no update, and every refusal (a typed error,
//     named for the first refused write in (kind, id) order) leaves rows
//     and watermarks as they were. Queries return rows in code-point order
//     of ids, each once across keyset pages.
//
// The kits are deterministic: they never sleep; channel waits are bounded by
// a generous timeout that only guards against a hang. They must not run in
// parallel with tests that start goroutines of their own, since the
// subscription subtests check for leaked goroutines.
package storetest
