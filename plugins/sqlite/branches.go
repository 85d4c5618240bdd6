package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// BranchRegistry keeps the refs of a DB in the refs table and implements
// store.BranchRegistry. Creating and moving a ref are write transactions on
// the DB's writer, durable before they return; a compare-and-set move
// reads and updates the version inside one transaction, so two racing moves
// with the same expected version cannot both win. One from
// DB.BranchRegistry shares its DB, and Close only detaches it; one from
// OpenBranchRegistry owns its DB, and Close closes it.
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
	err := r.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			n, err := c.exec(`INSERT INTO refs (name, execution_id, version) VALUES (?, ?, 1)
				ON CONFLICT (name) DO NOTHING`, name, executionID)
			if err == nil && n == 0 {
				err = fmt.Errorf("%w: %s", store.ErrRefExists, strconv.Quote(name))
			}
			return err
		})
	})
	if err != nil {
		return store.Ref{}, err
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
	err := r.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			version, found, err := c.queryInt64(`SELECT version FROM refs WHERE name = ?`, name)
			switch {
			case err != nil:
				return err
			case !found:
				return refNotFound(name)
			case expected != store.AnyVersion && expected != version:
				return &store.RefConflictError{Name: name, Expected: expected, Actual: version}
			}
			moved = store.Ref{Name: name, ExecutionID: executionID, Version: version + 1}
			_, err = c.exec(`UPDATE refs SET execution_id = ?, version = ? WHERE name = ?`,
				executionID, moved.Version, name)
			return err
		})
	})
	if err != nil {
		return store.Ref{}, err
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
	ref := store.Ref{Name: name}
	err := r.db.reads.ref.QueryRowContext(ctx, name).Scan(&ref.ExecutionID, &ref.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Ref{}, refNotFound(name)
	}
	if err != nil {
		return store.Ref{}, r.db.readErr("read ref", err)
	}
	return ref, nil
}

// ListRefs implements store.BranchRegistry: the refs whose name starts with
// prefix, ordered by name in code-point order. It scans the primary key
// from prefix and stops at the first name without it.
func (r *BranchRegistry) ListRefs(ctx context.Context, prefix string) ([]store.Ref, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	rows, err := r.db.reads.refsFrom.QueryContext(ctx, prefix)
	if err != nil {
		return nil, r.db.readErr("list refs", err)
	}
	var out []store.Ref
	for rows.Next() {
		var ref store.Ref
		if err := rows.Scan(&ref.Name, &ref.ExecutionID, &ref.Version); err != nil {
			return nil, errors.Join(r.db.readErr("list refs", err), rows.Close())
		}
		if !strings.HasPrefix(ref.Name, prefix) {
			break
		}
		out = append(out, ref)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, r.db.readErr("list refs", err)
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
