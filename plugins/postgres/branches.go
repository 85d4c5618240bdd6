package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// BranchRegistry keeps the refs of a DB in the refs table and implements
// store.BranchRegistry. Creating a ref is one INSERT; a compare-and-set
// move locks the ref's row (SELECT … FOR UPDATE), compares its version and
// updates it in one transaction, so two racing moves with the same expected
// version — in one process or in two — cannot both win, and the loser's
// *store.RefConflictError carries the version that beat it. Writes are
// durable before they return. One from DB.BranchRegistry shares its DB, and
// Close only detaches it; one from OpenBranchRegistry owns its DB, and
// Close closes it.
type BranchRegistry struct {
	view
}

var _ store.BranchRegistry = (*BranchRegistry)(nil)

// CreateRef implements store.BranchRegistry: it creates name at executionID
// with version 1, or returns store.ErrRefExists and changes nothing. A bad
// name or execution id is refused with the *event.InvalidEnvelopeError of
// store.ValidateRefName or event.ValidateID.
func (r *BranchRegistry) CreateRef(ctx context.Context, name, executionID string) (store.Ref, error) {
	if err := r.validate(name, executionID); err != nil {
		return store.Ref{}, err
	}
	tag, err := r.db.pool.Exec(ctx, r.db.q.refCreate, name, executionID)
	if err != nil {
		return store.Ref{}, r.readErr("create ref", err)
	}
	if tag.RowsAffected() == 0 {
		return store.Ref{}, fmt.Errorf("%w: %s", store.ErrRefExists, strconv.Quote(name))
	}
	return store.Ref{Name: name, ExecutionID: executionID, Version: 1}, nil
}

// MoveRef implements store.BranchRegistry: it points name at executionID
// and bumps its version iff the version is expected (or expected is
// store.AnyVersion); otherwise it returns *store.RefConflictError, or
// store.ErrRefNotFound, and changes nothing.
func (r *BranchRegistry) MoveRef(ctx context.Context, name, executionID string, expected int64) (store.Ref, error) {
	if err := r.validate(name, executionID); err != nil {
		return store.Ref{}, err
	}
	var moved store.Ref
	err := inTx(ctx, r.db.pool, func(tx pgx.Tx) error {
		var version int64
		err := tx.QueryRow(ctx, r.db.q.refLock, name).Scan(&version)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return refNotFound(name)
		case err != nil:
			return err
		case expected != store.AnyVersion && expected != version:
			return &store.RefConflictError{Name: name, Expected: expected, Actual: version}
		}
		moved = store.Ref{Name: name, ExecutionID: executionID, Version: version + 1}
		_, err = tx.Exec(ctx, r.db.q.refMove, name, executionID, moved.Version)
		return err
	})
	switch {
	case errors.Is(err, store.ErrRefNotFound) || errors.Is(err, store.ErrRefConflict):
		return store.Ref{}, err
	case err != nil:
		return store.Ref{}, r.readErr("move ref", err)
	}
	return moved, nil
}

func (r *BranchRegistry) validate(name, executionID string) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := store.ValidateRefName(name); err != nil {
		return err
	}
	return event.ValidateID("executionId", executionID)
}

// ReadRef implements store.BranchRegistry: the ref, or store.ErrRefNotFound.
func (r *BranchRegistry) ReadRef(ctx context.Context, name string) (store.Ref, error) {
	if err := r.check(); err != nil {
		return store.Ref{}, err
	}
	if !pgText(name) {
		return store.Ref{}, refNotFound(name)
	}
	ref := store.Ref{Name: name}
	err := r.db.pool.QueryRow(ctx, r.db.q.refRead, name).Scan(&ref.ExecutionID, &ref.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Ref{}, refNotFound(name)
	}
	if err != nil {
		return store.Ref{}, r.readErr("read ref", err)
	}
	return ref, nil
}

// ListRefs implements store.BranchRegistry: the refs whose name starts with
// prefix, ordered by name in code-point order (names are text COLLATE "C").
// A prefix that is not valid UTF-8, or holds NUL, matches no ref.
func (r *BranchRegistry) ListRefs(ctx context.Context, prefix string) ([]store.Ref, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if !pgText(prefix) {
		return nil, nil
	}
	rows, err := r.db.pool.Query(ctx, r.db.q.refList, prefix)
	if err != nil {
		return nil, r.readErr("list refs", err)
	}
	var out []store.Ref
	var ref store.Ref
	_, err = pgx.ForEachRow(rows, []any{&ref.Name, &ref.ExecutionID, &ref.Version}, func() error {
		out = append(out, ref)
		return nil
	})
	if err != nil {
		return nil, r.readErr("list refs", err)
	}
	return out, nil
}

// Close implements store.BranchRegistry: later calls return
// store.ErrClosed. A registry from OpenBranchRegistry closes its DB; one
// from DB.BranchRegistry only detaches. A second Close returns nil.
func (r *BranchRegistry) Close() error { return r.close() }

// refNotFound wraps store.ErrRefNotFound with the name that was missing.
func refNotFound(name string) error {
	return fmt.Errorf("%w: %s", store.ErrRefNotFound, strconv.Quote(name))
}
