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
// Finding a subject's executions (ExecutionsOf, for EraseSubject and
// ExportSubject) scans sequence 0 of every execution unless
// EventStoreOptions.Index holds a SubjectIndex: NewLogSubjectIndex over an
// event store of its own (a separate SQLite file or PostgreSQL schema,
// never the kernel's, which would see its streams as executions). The
// index costs one durable append before each sealed execution's first
// append and each fork, refusing that write if the append fails; its
// entries without a matching log are filtered against sequence 0.
//
// Composition: put the encryption OUTSIDE an audit chain,
// crypto(auditchain(store)), so the chain hashes sealed bytes and an
// erasure never breaks it. See docs/encryption.md.
package crypto
