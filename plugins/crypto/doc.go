// Package crypto is Loom's at-rest encryption and crypto-shredding (K10):
// store wrappers that seal the data of the log, the snapshots and the
// claim-check blobs under one key per subject, and a KeyStore whose Destroy
// erases a subject by destroying its key.
//
// What is sealed: the data members of each event type (FieldTable,
// DefaultFields) with AES-256-GCM, a random nonce, and the execution id,
// sequence, event type and member name as additional data, so a sealed
// value opens only where it was written. The frame — ids, type, sequence,
// timestamp, and the members the kernel folds by structure (stepId,
// attempt, on, decisionId, …) — stays readable, so listing, the status
// index, fencing and recovery work on sealed logs unchanged. Each sealed
// envelope records metadata.seal {v, cipher, subject, keyId, covers}; the
// fold carries it and ignores it.
//
// The subject of an execution is chosen once, from its first envelope
// (EventStoreOptions.Subject, e.g. SubjectFromPrincipal), recorded in
// metadata.seal of sequence 0, and found there for every later append,
// snapshot and erasure.
//
// Erasure: EventStore.EraseSubject destroys the subject's key and returns
// the DestructionProof and the executions that held the subject. From then
// on every read returns a ShreddedMarker {"$shredded":true,"subject",
// "keyId"} in place of each sealed member: valid JSON, never an error, so
// the fold, LoadState, a replay check and listing still work. A value that
// does not open for any other reason (altered bytes, another master key, a
// moved value) is *SealError, never a marker. Recording PAYLOAD_SHREDDED is
// the kernel's: Erasure.Executions says where.
//
// Composition: put the encryption OUTSIDE an audit chain,
// crypto(auditchain(store)), so the chain hashes sealed bytes and an
// erasure never breaks it. See docs/encryption.md.
package crypto
