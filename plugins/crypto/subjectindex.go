package crypto

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// SubjectIndex is the durable map from a subject to the executions started
// under it, so ExecutionsOf (and with it EraseSubject and ExportSubject)
// reads the subject's executions instead of sequence 0 of every execution
// in the store. Set it in EventStoreOptions.Index.
//
// The EventStore calls Add before an execution's first append (and before
// a CopyPrefix that forks one), so an index may hold ids that never got a
// log — a crash between Add and the append, a refused append, an id
// recreated under another subject — and the EventStore filters them out
// against the log; an index must never miss an id whose first append
// succeeded.
type SubjectIndex interface {
	// Add records that executionID is sealed under subject. It returns only
	// once the record is durable; on an error the EventStore refuses the
	// append it was called for, writing nothing. Adding a pair twice is
	// harmless.
	Add(ctx context.Context, subject, executionID string) error
	// Executions returns every execution id added under subject, each once,
	// sorted in code-point order; ids added under another subject are never
	// returned. An unknown subject has none.
	Executions(ctx context.Context, subject string) ([]string, error)
}

// SubjectIndexStreamPrefix starts the id of every stream of a
// LogSubjectIndex; the rest is the lower-hex SHA-256 of the subject.
const SubjectIndexStreamPrefix = "loom-subject-index:"

// SubjectIndexEntryType is the event type of one LogSubjectIndex entry;
// its payload is {"executionId": "..."}.
const SubjectIndexEntryType = "SUBJECT_EXECUTION"

// subjectIndexWorkflow is the workflow id of every entry, so a listing of
// the index's store says what its streams are.
const subjectIndexWorkflow = "loom.subject-index"

// MaxSubjectIndexAttempts bounds the appends one Add tries: each refused
// attempt means another Add of the same subject won its sequence, so this
// many concurrent Adds of one subject always succeed.
const MaxSubjectIndexAttempts = 256

// maxCachedIndexLengths bounds the stream → length hints of a
// LogSubjectIndex; when full it is emptied (a miss costs one read).
const maxCachedIndexLengths = 1 << 16

// ErrSubjectIndexContended matches *SubjectIndexContendedError.
var ErrSubjectIndexContended = errors.New("crypto: subject index contended")

// SubjectIndexContendedError is an Add refused after
// MaxSubjectIndexAttempts sequence conflicts; nothing of it was written.
// It names the stream (a digest), not the subject.
type SubjectIndexContendedError struct {
	Stream   string
	Attempts int
	Err      error // the last *store.SequenceConflictError
}

func (e *SubjectIndexContendedError) Error() string {
	return "crypto: subject index stream " + strconv.Quote(e.Stream) + ": " + strconv.Itoa(e.Attempts) +
		" appends refused by concurrent ones: " + e.Err.Error()
}

// Is makes errors.Is(err, ErrSubjectIndexContended) true.
func (e *SubjectIndexContendedError) Is(target error) bool { return target == ErrSubjectIndexContended }

// Unwrap returns the last sequence conflict.
func (e *SubjectIndexContendedError) Unwrap() error { return e.Err }

// LogSubjectIndex is a SubjectIndex kept in a store.EventStore: one stream
// per subject (SubjectIndexStreamPrefix + hex SHA-256 of the subject, so no
// subject's length or characters reach an id limit), one
// SubjectIndexEntryType envelope appended per Add, as durable as that
// store's Append.
//
// Its store must NOT be the kernel's event store (nor share its tables): a
// separate SQLite file, a separate PostgreSQL schema. In the kernel's store
// the streams would be listed, recovered and folded as executions. The
// streams hold no subject in plaintext, but the digest of a guessable
// subject can be confirmed and the streams say which executions share a
// subject: keep the store as protected as the log (whose seals name
// subjects anyway).
//
// It is safe for concurrent use, also by several processes over one store:
// Adds of one subject race on the stream's sequence and retry.
type LogSubjectIndex struct {
	events store.EventStore
	// lengths hints each stream's next sequence; a stale hint costs a
	// conflict and a re-read of the tail, never a lost entry.
	mu      sync.Mutex
	lengths map[string]int64
}

// NewLogSubjectIndex returns the index kept in events, which the caller
// keeps and closes. It refuses a nil store.
func NewLogSubjectIndex(events store.EventStore) (*LogSubjectIndex, error) {
	if events == nil {
		return nil, errors.New("crypto: NewLogSubjectIndex needs an event store")
	}
	return &LogSubjectIndex{events: events, lengths: make(map[string]int64)}, nil
}

// SubjectIndexStream returns the id of subject's stream in a LogSubjectIndex.
func SubjectIndexStream(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return SubjectIndexStreamPrefix + hex.EncodeToString(sum[:])
}

type subjectIndexEntry struct {
	ExecutionID string `json:"executionId"`
}

// Add implements SubjectIndex: one append to subject's stream at its
// current length. A sequence conflict (another Add of the subject) re-reads
// the length and tries again, at most MaxSubjectIndexAttempts times, then
// fails with *SubjectIndexContendedError. An invalid subject or id is
// refused before anything is written.
func (ix *LogSubjectIndex) Add(ctx context.Context, subject, executionID string) error {
	if err := validSubject(subject); err != nil {
		return err
	}
	if err := event.ValidateID("executionId", executionID); err != nil {
		return err
	}
	payload, err := json.Marshal(subjectIndexEntry{ExecutionID: executionID})
	if err != nil {
		return err
	}
	stream := SubjectIndexStream(subject)
	next := ix.hint(stream)
	var conflict *store.SequenceConflictError
	for attempt := 1; attempt <= MaxSubjectIndexAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := event.Envelope{ID: stream + ":" + strconv.FormatInt(next, 10), WorkflowID: subjectIndexWorkflow,
			ExecutionID: stream, Type: SubjectIndexEntryType, Sequence: next, Payload: payload}
		err := ix.events.Append(ctx, stream, next, []event.Envelope{e})
		if err == nil {
			ix.remember(stream, next+1)
			return nil
		}
		if !errors.As(err, &conflict) {
			return err
		}
		if next, err = ix.length(ctx, stream, next); err != nil {
			return err
		}
	}
	return &SubjectIndexContendedError{Stream: stream, Attempts: MaxSubjectIndexAttempts, Err: conflict}
}

// length re-reads the length of stream: the tail from the last tried
// length, or the whole stream when that is past its end (a stale hint).
func (ix *LogSubjectIndex) length(ctx context.Context, stream string, known int64) (int64, error) {
	tail, err := ix.events.ReadFrom(ctx, stream, known)
	if err != nil {
		return 0, err
	}
	if len(tail) > 0 {
		n := known + int64(len(tail))
		ix.remember(stream, n)
		return n, nil
	}
	all, err := ix.events.ReadFrom(ctx, stream, 0)
	if err != nil {
		return 0, err
	}
	n := int64(len(all))
	ix.remember(stream, n)
	return n, nil
}

// Executions implements SubjectIndex: it reads subject's stream, at most
// MaxErasureScan entries. An entry that is not a SubjectIndexEntryType
// with an execution id is an error naming its sequence: the stream is the
// index's alone.
func (ix *LogSubjectIndex) Executions(ctx context.Context, subject string) ([]string, error) {
	if err := validSubject(subject); err != nil {
		return nil, err
	}
	stream := SubjectIndexStream(subject)
	evs, err := ix.events.ReadFrom(ctx, stream, 0)
	if err != nil {
		return nil, err
	}
	if len(evs) > MaxErasureScan {
		return nil, fmt.Errorf("crypto: subject index stream %q holds more than %d entries", stream, MaxErasureScan)
	}
	ix.remember(stream, int64(len(evs)))
	seen := make(map[string]bool, len(evs))
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		var en subjectIndexEntry
		if e.Type != SubjectIndexEntryType || json.Unmarshal(e.Payload, &en) != nil || en.ExecutionID == "" {
			return nil, fmt.Errorf("crypto: subject index stream %q: malformed entry at sequence %d", stream, e.Sequence)
		}
		if !seen[en.ExecutionID] {
			seen[en.ExecutionID] = true
			out = append(out, en.ExecutionID)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (ix *LogSubjectIndex) hint(stream string) int64 {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.lengths[stream]
}

// remember sets the hint of stream to n; a racing older answer costs at
// most one conflict.
func (ix *LogSubjectIndex) remember(stream string, n int64) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if len(ix.lengths) >= maxCachedIndexLengths {
		clear(ix.lengths)
	}
	ix.lengths[stream] = n
}
