// Package auditchain makes an event log tamper-evident: a store.EventStore
// wrapper that hash-chains every envelope it appends, and Verify, which
// recomputes the chain and names the first sequence that no longer fits.
//
// # The chain
//
// Wrap stamps each appended envelope with the metadata member MetadataKey
// ("auditChain"), a JSON string holding
//
//	link(n) = H(link(n-1) || bytes(envelope n))
//
// where link(-1) is 32 zero bytes (the genesis value), bytes is event.Encode
// of the envelope with executionId set to "", the chain member removed and
// every other metadata value compacted (json.Compact), and H is SHA-256, or
// HMAC-SHA-256 under Options.Key. The payload is covered byte for byte:
// every store returns it so (the storetest contract), and a reformatted
// payload is an edit, since a duplicate member name means different things
// to different readers. The member reads "sha256:<64 hex>" or
// "hmac-sha256:<key id>:<64 hex>"; the key id (16 hex digits of an HMAC of
// a fixed label under the key) names the key without revealing it, so a
// verification under another key fails as such, at sequence 0.
//
// Leaving executionId out of the hash keeps a fork valid: the kernel's fork
// (store.PrefixCopier) copies a prefix byte for byte under a new execution
// id, and the copy's chain goes on from the copied head. The fold ignores
// the member (an unknown metadata member is carried and ignored), and reads
// through the wrapper strip it, so the application sees its envelopes as it
// appended them; Verify and VerifyExecution read the stored bytes.
//
// # Appends
//
// An append computes the links of its whole batch before one inner Append
// (or AppendFenced), so it stays atomic: the inner store writes all of the
// chained batch or none of it. The previous link comes from a bounded cache
// of heads written through this wrapper, else from the inner store's last
// event (store.RangeReader). Any failed write drops the execution's cache
// entry, and a write that overlapped a drop never refills it, so the cache
// is never ahead of, or different from, the log. Concurrent appends of one
// execution are serialized by the inner store's expected-sequence check: the
// loser's batch, chained on the same head, is refused whole.
//
// # What it proves, and what not
//
// A verified chain proves no event was edited, deleted from the middle,
// inserted or reordered since it was written, and (under a key the attacker
// lacks) that the log was written by a holder of the key. It does not prove
// the newest events were not cut off the end: Result.Head is the link to
// anchor elsewhere (a ticket, a WORM bucket, a signed report) for that.
// Without a key, anyone who can write the store can also recompute the
// chain: the unkeyed chain detects accidents and careless edits only.
package auditchain
