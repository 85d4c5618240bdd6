package auditchain

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Reason says why a log failed verification.
type Reason string

// The reasons, each naming a distinct kind of damage at Result.Sequence.
const (
	// ReasonEdited: the envelope's bytes (or its link) differ from what
	// was chained.
	ReasonEdited Reason = "edited"
	// ReasonDeleted: events are missing before this sequence: a gap in
	// the sequences, or a chain that resumes intact only once the later
	// sequences are shifted back (deleted and renumbered).
	ReasonDeleted Reason = "deleted"
	// ReasonReordered: this envelope and the next are each intact but in
	// each other's place (or a sequence repeats or goes backwards).
	ReasonReordered Reason = "reordered"
	// ReasonUnchained: the envelope carries no chain member.
	ReasonUnchained Reason = "unchained"
	// ReasonWrongKey: the member was written under another key, or keyed
	// where the verification is unkeyed, or the reverse.
	ReasonWrongKey Reason = "wrong-key"
	// ReasonMalformed: the member is not a link this package writes, or
	// the envelope cannot be encoded, or belongs to another execution.
	ReasonMalformed Reason = "malformed"
)

// MaxShiftProbe bounds how many deleted-and-renumbered events Verify
// looks for when a link breaks (each probe is one hash).
const MaxShiftProbe = 64

// Result is the verdict on one log.
type Result struct {
	ExecutionID string
	// Length is the number of envelopes checked.
	Length int
	// OK is true when every link verified.
	OK bool
	// Sequence is the first tampered sequence when !OK.
	Sequence int64
	// Reason and Detail say why, when !OK.
	Reason Reason
	Detail string
	// Head is the last event's member value when OK (the empty log's is
	// ""): anchor it elsewhere to detect a truncated log later.
	Head string
}

// Verify recomputes the chain of log, one execution's envelopes in
// sequence order as stored (chain member included), under opts.Key, and
// reports the first sequence that does not fit and why. It reads nothing
// but its arguments. An empty log verifies.
func Verify(log []event.Envelope, opts Options) Result {
	c := newChainer(opts.Key)
	v := verifier{log: log, c: c, h: c.newHash()}
	return v.run()
}

// VerifyExecution reads the whole log of executionID from events and
// verifies it. Given the wrapper itself, it reads the inner store, whose
// envelopes carry the member. An unknown execution has an empty log, which
// verifies with Length 0. A compacted log (store.PrefixTrimmer) is
// verified with its archived events in place, read from Options.Archive;
// without one it is refused with *CompactedLogError.
func VerifyExecution(ctx context.Context, events store.EventStore, executionID string, opts Options) (Result, error) {
	if w, ok := events.(*EventStore); ok {
		events = w.inner
	}
	log, err := events.ReadFrom(ctx, executionID, 0)
	if err != nil {
		return Result{}, err
	}
	if log, err = withArchived(ctx, events, executionID, log, opts.Archive); err != nil {
		return Result{}, err
	}
	r := Verify(log, opts)
	r.ExecutionID = executionID
	return r, nil
}

type verifier struct {
	log []event.Envelope
	c   chainer
	h   hash.Hash
}

func (v *verifier) run() Result {
	r := Result{Length: len(v.log)}
	if len(v.log) > 0 {
		r.ExecutionID = v.log[0].ExecutionID
	}
	fail := func(seq int64, why Reason, detail string, args ...any) Result {
		r.Sequence, r.Reason, r.Detail = seq, why, fmt.Sprintf(detail, args...)
		return r
	}
	prev, head := genesis, ""
	for i, e := range v.log {
		seq := int64(i)
		switch {
		case e.Sequence > seq && v.holds(i+1, seq):
			return fail(seq, ReasonReordered, "event #%d comes before #%d", e.Sequence, seq)
		case e.Sequence > seq:
			return fail(seq, ReasonDeleted, "the log skips from #%d to #%d: %d event(s) are missing", seq-1, e.Sequence, e.Sequence-seq)
		case e.Sequence < seq:
			return fail(seq, ReasonReordered, "event #%d comes after #%d", e.Sequence, seq-1)
		case e.ExecutionID != r.ExecutionID:
			return fail(seq, ReasonMalformed, "it belongs to another execution")
		}
		m, st := parseMember(e)
		switch {
		case st == memberMissing:
			return fail(seq, ReasonUnchained, "it has no %s member", MetadataKey)
		case st == memberMalformed:
			return fail(seq, ReasonMalformed, "its %s member is not a link", MetadataKey)
		case !v.c.sameKey(m):
			return fail(seq, ReasonWrongKey, "it was chained with %s, and is verified with %s", keyName(m.keyID), v.c.describe())
		}
		got, ok := v.next(prev, e)
		if !ok {
			return fail(seq, ReasonMalformed, "it cannot be encoded")
		}
		if got == m.link {
			prev, head = got, m.text
			continue
		}
		why, detail := v.classify(i, prev, got, m)
		return fail(seq, why, "%s", detail)
	}
	r.OK, r.Head = true, head
	return r
}

// holds reports whether an envelope from log[from] on has sequence seq.
func (v *verifier) holds(from int, seq int64) bool {
	for _, e := range v.log[from:] {
		if e.Sequence == seq {
			return true
		}
	}
	return false
}

func keyName(id string) string {
	if id == "" {
		return "no key (sha256)"
	}
	return "key id " + id
}

// next is chainer.next for an envelope the verifier may not encode.
func (v *verifier) next(prev link, e event.Envelope) (link, bool) {
	l, err := v.c.next(v.h, prev, e, false)
	return l, err == nil
}

// linkOf returns the member link of log[j], if it has a usable one.
func (v *verifier) linkOf(j int) (link, bool) {
	if j >= len(v.log) {
		return link{}, false
	}
	m, st := parseMember(v.log[j])
	return m.link, st == memberOK && v.c.sameKey(m)
}

// follows reports whether e, chained on prev, gives want.
func (v *verifier) follows(prev link, e event.Envelope, want link) bool {
	got, ok := v.next(prev, e)
	return ok && got == want
}

// classify explains a broken link at log[i]: prev is the verified link
// before it, got what its bytes chain to, m its member.
func (v *verifier) classify(i int, prev, got link, m member) (Reason, string) {
	seq := int64(i)
	nextLink, hasNext := v.linkOf(i + 1)
	if hasNext {
		// Reordered: the next envelope belongs here and this one there.
		a, b := v.log[i+1], v.log[i]
		a.Sequence, b.Sequence = seq, seq+1
		if v.follows(prev, a, nextLink) && v.follows(nextLink, b, m.link) {
			return ReasonReordered, fmt.Sprintf("events #%d and #%d are in each other's place", seq, seq+1)
		}
		// Deleted and renumbered: the chain goes on intact from this
		// link once the later sequences are shifted back.
		for d := int64(1); d <= MaxShiftProbe; d++ {
			f := v.log[i+1]
			f.Sequence += d
			if v.follows(m.link, f, nextLink) {
				return ReasonDeleted, fmt.Sprintf("%d event(s) before it were deleted and the later ones renumbered", d)
			}
		}
		if v.follows(m.link, v.log[i+1], nextLink) {
			return ReasonEdited, "its content changed after it was chained (the chain goes on intact after it)"
		}
		if v.follows(got, v.log[i+1], nextLink) {
			return ReasonEdited, "its " + MetadataKey + " member was altered"
		}
	}
	return ReasonEdited, fmt.Sprintf("its bytes chain to %s…, its member says %s…", hex.EncodeToString(got[:6]), hex.EncodeToString(m.link[:6]))
}

// CompactedLogError refuses to verify a compacted log without the archive
// its settled history moved into: the chain would read as broken at the
// first removed sequence.
type CompactedLogError struct {
	ExecutionID string
	Through     int64 // the log's compaction point
	// NoArchive is true when no archive was given; else the archive held
	// none of the events 1..Through.
	NoArchive bool
}

func (e *CompactedLogError) Error() string {
	if e.NoArchive {
		return fmt.Sprintf("auditchain: %q is compacted through #%d: verify it with the archive its history moved into (Options.Archive, loom audit verify reads the store's)", e.ExecutionID, e.Through)
	}
	return fmt.Sprintf("auditchain: %q is compacted through #%d and the archive given holds none of the events #1..#%d: pass the archive compaction wrote", e.ExecutionID, e.Through, e.Through)
}

// withArchived puts the archived events 1..through of a compacted log back
// between its start event and its tail, as the chain covered them.
func withArchived(ctx context.Context, events store.EventStore, executionID string, log []event.Envelope, archive store.ArchiveStore) ([]event.Envelope, error) {
	tr, ok := events.(store.PrefixTrimmer)
	if !ok || len(log) == 0 {
		return log, nil
	}
	through, err := tr.TrimmedThrough(ctx, executionID)
	if err != nil || through == 0 {
		return log, err
	}
	if archive == nil {
		return nil, &CompactedLogError{ExecutionID: executionID, Through: through, NoArchive: true}
	}
	if a, ok := archive.(*ArchiveStore); ok {
		archive = a.inner
	}
	archived, err := archive.ReadArchived(ctx, executionID, 1, through+1)
	if err != nil {
		return nil, err
	}
	if len(archived) == 0 {
		return nil, &CompactedLogError{ExecutionID: executionID, Through: through}
	}
	// An archived event missing, or one past the compaction point, is for
	// the chain to name (deleted, reordered).
	out := make([]event.Envelope, 0, len(log)+len(archived))
	out = append(out, log[0])
	out = append(out, archived...)
	return append(out, log[1:]...), nil
}
