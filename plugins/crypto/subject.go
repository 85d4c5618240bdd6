package crypto

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// MaxCachedSubjects bounds the execution → subject cache of an EventStore;
// when it is full it is emptied, and a miss costs one read of sequence 0.
const MaxCachedSubjects = 1 << 16

// SubjectFromPrincipal is a SubjectFunc: the id of the principal an
// execution was started under (EXECUTION_STARTED.principal.id), "" (not
// sealed) for an execution without one.
func SubjectFromPrincipal(first event.Envelope) string {
	var p struct {
		Principal struct {
			ID string `json:"id"`
		} `json:"principal"`
	}
	if first.Type != event.ExecutionStarted || json.Unmarshal(first.Payload, &p) != nil {
		return ""
	}
	return p.Principal.ID
}

// SubjectFromInput returns a SubjectFunc that reads the string member of
// the execution's input (EXECUTION_STARTED.input.<member>); an execution
// whose input has no such string is not sealed.
func SubjectFromInput(member string) SubjectFunc {
	return func(first event.Envelope) string {
		var p struct {
			Input map[string]json.RawMessage `json:"input"`
		}
		if first.Type != event.ExecutionStarted || json.Unmarshal(first.Payload, &p) != nil {
			return ""
		}
		var s string
		if json.Unmarshal(p.Input[member], &s) != nil {
			return ""
		}
		return s
	}
}

// FixedSubject returns a SubjectFunc that seals every execution under one
// subject (a single-tenant deployment, a test).
func FixedSubject(subject string) SubjectFunc {
	return func(event.Envelope) string { return subject }
}

// subjectCache maps execution ids to their subjects ("" for an execution
// that is not sealed).
type subjectCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *subjectCache) get(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[id]
	return s, ok
}

func (c *subjectCache) put(id, subject string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= MaxCachedSubjects {
		c.m = make(map[string]string)
	}
	c.m[id] = subject
}

func (c *subjectCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// subjectForAppend is the subject of a batch: for a first append, the
// SubjectFunc's choice (an inbox stream takes its owner's subject); later,
// the one sequence 0 recorded.
func (s *EventStore) subjectForAppend(ctx context.Context, executionID string, expected int64, first event.Envelope) (string, error) {
	if expected > 0 {
		return s.SubjectOf(ctx, executionID)
	}
	if owner, ok := inboxOwner(executionID); ok {
		return s.SubjectOf(ctx, owner)
	}
	subject := s.subject(first)
	if subject != "" {
		if err := validSubject(subject); err != nil {
			return "", &store.InvalidAppendError{Index: 0, Reason: "the SubjectFunc chose an invalid subject", Err: err}
		}
	}
	return subject, nil
}

// SubjectOf returns the subject executionID is sealed under, "" when it is
// not sealed or has no events. It reads metadata.seal of sequence 0 (no
// key is needed) and caches the answer; an inbox stream answers its
// owner's subject.
func (s *EventStore) SubjectOf(ctx context.Context, executionID string) (string, error) {
	if err := s.usable(); err != nil {
		return "", err
	}
	if subject, ok := s.subjects.get(executionID); ok {
		return subject, nil
	}
	if owner, ok := inboxOwner(executionID); ok {
		return s.SubjectOf(ctx, owner)
	}
	subject, found, err := s.recordedSubject(ctx, executionID)
	if err != nil || !found {
		return "", err
	}
	s.subjects.put(executionID, subject)
	return subject, nil
}

// recordedSubject reads the subject sequence 0 of executionID records.
func (s *EventStore) recordedSubject(ctx context.Context, executionID string) (subject string, found bool, err error) {
	evs, err := s.inner.ReadRange(ctx, executionID, 0, 1)
	if err != nil || len(evs) == 0 {
		return "", false, err
	}
	seal, ok, err := parseSeal(evs[0].Metadata)
	if err != nil {
		return "", true, &SealError{ExecutionID: executionID, Sequence: 0, EventType: evs[0].Type,
			Reason: "malformed metadata." + SealMetadataKey, Err: err}
	}
	if !ok {
		return "", true, nil
	}
	return seal.Subject, true, nil
}

// inboxOwner parses an inbox stream id ("__loom_inbox__:<len>:<chain>:<topic>")
// into the execution whose inbox it is.
func inboxOwner(executionID string) (string, bool) {
	rest, ok := strings.CutPrefix(executionID, store.InboxStreamPrefix)
	if !ok {
		return "", false
	}
	n, tail, ok := strings.Cut(rest, ":")
	size, err := strconv.Atoi(n)
	if !ok || err != nil || size <= 0 || size >= len(tail) || tail[size] != ':' {
		return "", false
	}
	return tail[:size], true
}

// MaxErasureScan bounds the executions ExecutionsOf reads.
const MaxErasureScan = 10_000_000

// ExecutionsOf returns the executions sealed under subject, in id order
// (inbox streams left out: they follow their owner). No key is needed.
//
// With an Index, it reads the ids the index holds for subject and keeps
// those whose sequence 0 records subject — dropping ids that never got a
// log, were deleted, or were recreated under another subject — one read
// per id of the subject's, none of another's. Without one (and for "", the
// unsealed executions, which no index holds) it scans every execution's
// sequence 0 through the listing, O(executions) reads. Either way it is as
// durable as the log, and it refuses past MaxErasureScan executions.
func (s *EventStore) ExecutionsOf(ctx context.Context, subject string) ([]string, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if s.index != nil && subject != "" {
		return s.indexedExecutionsOf(ctx, subject)
	}
	var out []string
	after, scanned := "", 0
	for {
		page, err := s.inner.ListExecutions(ctx, after, 256)
		if err != nil {
			return nil, err
		}
		for _, info := range page.Executions {
			if scanned++; scanned > MaxErasureScan {
				return nil, fmt.Errorf("crypto: ExecutionsOf scanned more than %d executions", MaxErasureScan)
			}
			if store.IsInboxStream(info.ExecutionID) {
				continue
			}
			got, _, err := s.recordedSubject(ctx, info.ExecutionID)
			if err != nil {
				return nil, err
			}
			if got == subject {
				out = append(out, info.ExecutionID)
			}
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// indexedExecutionsOf is ExecutionsOf through the Index.
func (s *EventStore) indexedExecutionsOf(ctx context.Context, subject string) ([]string, error) {
	ids, err := s.index.Executions(ctx, subject)
	if err != nil {
		return nil, err
	}
	if len(ids) > MaxErasureScan {
		return nil, fmt.Errorf("crypto: ExecutionsOf: the index holds more than %d executions", MaxErasureScan)
	}
	ids = slices.Clone(ids)
	slices.Sort(ids) // an index of the caller's may break its contract: the answer stays in id order
	out := make([]string, 0, len(ids))
	for i, id := range ids {
		if store.IsInboxStream(id) || (i > 0 && id == ids[i-1]) {
			continue
		}
		got, found, err := s.recordedSubject(ctx, id)
		if err != nil {
			return nil, err
		}
		if found && got == subject {
			out = append(out, id)
		}
	}
	return out, nil
}

// Erasure is what EraseSubject did: the proof of the destroyed key and the
// executions whose sealed members now read as shredded markers — those a
// PAYLOAD_SHREDDED {subject} fact belongs in.
type Erasure struct {
	Proof      DestructionProof
	Executions []string
}

// EraseSubject crypto-shreds subject: it finds the executions sealed under
// it (ExecutionsOf), then destroys its key through the KeyStore, durably.
// From then on every read of those members, through any wrapper over the
// same KeyStore, returns a ShreddedMarker, and no new data is sealed under
// the subject. A failure to find the executions (the scan, or the Index)
// destroys nothing. Erasing an erased
// subject returns the recorded proof again. Recording PAYLOAD_SHREDDED in
// each execution is the caller's (the kernel's) step.
func (s *EventStore) EraseSubject(ctx context.Context, subject string) (Erasure, error) {
	if err := validSubject(subject); err != nil {
		return Erasure{}, err
	}
	execs, err := s.ExecutionsOf(ctx, subject)
	if err != nil {
		return Erasure{}, err
	}
	p, err := s.keys.Destroy(ctx, subject)
	if err != nil {
		return Erasure{}, err
	}
	return Erasure{Proof: p, Executions: execs}, nil
}
