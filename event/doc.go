// Package event defines the kernel's on-disk ABI: the Envelope every execution
// log is made of, the event types the fold understands (KnownTypes, pinned to
// SchemaVersion), canonical JSON and the digests computed over it, and
// UnmarshalExact, the decoder of recorded JSON: member names matched exactly
// and given once, strings valid UTF-8 without lone surrogates.
//
// The package is pure: it reads no clock, no randomness and no environment.
// Payloads stay json.RawMessage end to end, so a number is never re-encoded
// through float64 and a log written here reads back byte for byte.
package event
