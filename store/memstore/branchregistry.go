package memstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Interface check: the BranchRegistry implements store.BranchRegistry.
var _ store.BranchRegistry = (*BranchRegistry)(nil)

// BranchRegistry is the in-memory store.BranchRegistry. Ref names are kept
// in a sorted slice, so listing a prefix is a binary search plus the matches.
// It is safe for concurrent use; build one with NewBranchRegistry.
type BranchRegistry struct {
	mu     sync.RWMutex
	closed bool
	refs   map[string]store.Ref
	names  []string // ascending (code-point order)
}

// NewBranchRegistry returns an empty in-memory branch registry.
func NewBranchRegistry() *BranchRegistry {
	return &BranchRegistry{refs: make(map[string]store.Ref)}
}

// CreateRef creates name at executionID with version 1. It refuses an
// invalid name (store.ValidateRefName) or execution id (event.ValidateID)
// with their *event.InvalidEnvelopeError, and a taken name with an error
// matching store.ErrRefExists; a refusal changes nothing.
func (r *BranchRegistry) CreateRef(ctx context.Context, name, executionID string) (store.Ref, error) {
	if err := ctx.Err(); err != nil {
		return store.Ref{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return store.Ref{}, store.ErrClosed
	}
	if err := validateRef(name, executionID); err != nil {
		return store.Ref{}, err
	}
	if _, ok := r.refs[name]; ok {
		return store.Ref{}, fmt.Errorf("%w: %s", store.ErrRefExists, strconv.Quote(name))
	}
	ref := store.Ref{Name: name, ExecutionID: executionID, Version: 1}
	r.refs[name] = ref
	i := sort.SearchStrings(r.names, name)
	r.names = append(r.names, "")
	copy(r.names[i+1:], r.names[i:])
	r.names[i] = name
	return ref, nil
}

// MoveRef points name at executionID and bumps its version by one, iff its
// version is expected or expected is store.AnyVersion. Otherwise it returns
// *store.RefConflictError (a stale version) or an error matching
// store.ErrRefNotFound, and changes nothing. Invalid names and ids are
// refused as in CreateRef.
func (r *BranchRegistry) MoveRef(ctx context.Context, name, executionID string, expected int64) (store.Ref, error) {
	if err := ctx.Err(); err != nil {
		return store.Ref{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return store.Ref{}, store.ErrClosed
	}
	if err := validateRef(name, executionID); err != nil {
		return store.Ref{}, err
	}
	ref, ok := r.refs[name]
	if !ok {
		return store.Ref{}, refNotFound(name)
	}
	if expected != store.AnyVersion && expected != ref.Version {
		return store.Ref{}, &store.RefConflictError{Name: name, Expected: expected, Actual: ref.Version}
	}
	ref.ExecutionID = executionID
	ref.Version++
	r.refs[name] = ref
	return ref, nil
}

// ReadRef returns the ref called name, or an error matching
// store.ErrRefNotFound (also for a name no ref could have).
func (r *BranchRegistry) ReadRef(ctx context.Context, name string) (store.Ref, error) {
	if err := ctx.Err(); err != nil {
		return store.Ref{}, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return store.Ref{}, store.ErrClosed
	}
	ref, ok := r.refs[name]
	if !ok {
		return store.Ref{}, refNotFound(name)
	}
	return ref, nil
}

// ListRefs returns the refs whose name starts with prefix, sorted by name in
// code-point order; "" lists every ref. No match is an empty list, not an
// error.
func (r *BranchRegistry) ListRefs(ctx context.Context, prefix string) ([]store.Ref, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return nil, store.ErrClosed
	}
	var out []store.Ref
	for i := sort.SearchStrings(r.names, prefix); i < len(r.names) && strings.HasPrefix(r.names[i], prefix); i++ {
		out = append(out, r.refs[r.names[i]])
	}
	return out, nil
}

// Close marks the registry closed and drops its refs. The first Close
// returns nil; every later call of any method returns store.ErrClosed.
func (r *BranchRegistry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return store.ErrClosed
	}
	r.closed = true
	r.refs = nil
	r.names = nil
	return nil
}

// validateRef refuses a bad ref name or a bad execution id.
func validateRef(name, executionID string) error {
	if err := store.ValidateRefName(name); err != nil {
		return err
	}
	return event.ValidateID("executionId", executionID)
}

// refNotFound wraps store.ErrRefNotFound with the name that was missing.
func refNotFound(name string) error {
	return fmt.Errorf("%w: %s", store.ErrRefNotFound, strconv.Quote(name))
}
