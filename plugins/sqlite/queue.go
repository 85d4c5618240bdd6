package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/loom-kernel/loom/store"
)

// QueueStore keeps the durable start queues of a DB in the queue_items
// table (and, for Rate limits, queue_claims) and implements
// store.QueueStore.
//
// Enqueue, Claim, Renew, Complete and Release are write transactions on the
// DB's writer, one each, durable (fsynced under SyncFull) before they
// return; a crash before the commit leaves the queue as it was. The writer
// runs one transaction at a time, and Claim counts the live claims, checks
// every limit and grants in one of them, so the limits hold across every
// caller in this process or another on the file. ReadyTenants and Depth
// read the last committed state on the read pool.
//
// Tokens count the claims of an item (Token equals Attempt), so every
// claim of an item outranks the ones before. One from DB.QueueStore shares
// its DB, and Close only detaches it; one from OpenQueueStore owns its DB,
// and Close closes it.
type QueueStore struct {
	view
}

var _ store.QueueStore = (*QueueStore)(nil)

// QueueStore returns a view of the start queues. Closing it does not close db.
func (db *DB) QueueStore() *QueueStore { return &QueueStore{view: view{db: db}} }

// queueItemCols are the columns itemFromRow reads, in its order.
const queueItemCols = `queue, execution_id, flow_id, input, tenant, priority, partition_key, enqueued_at, meta`

const (
	// sqlEnqueue inserts a new item; a held (queue, execution_id), done or
	// not, is left as it is (0 rows).
	sqlEnqueue = `INSERT INTO queue_items (` + queueItemCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (queue, execution_id) DO NOTHING`
	// sqlLiveClaims counts a queue's live claims at now, and the owner's.
	// Arguments: owner, queue, now.
	sqlLiveClaims = `SELECT COUNT(*), COALESCE(SUM(owner = ?), 0) FROM queue_items
	WHERE queue = ? AND done = 0 AND owner IS NOT NULL AND expires_at > ?`
	// sqlLivePartitions counts the live claims of each non-empty partition
	// key. Arguments: queue, now.
	sqlLivePartitions = `SELECT partition_key, COUNT(*) FROM queue_items
	WHERE queue = ? AND done = 0 AND owner IS NOT NULL AND expires_at > ? AND partition_key <> ''
	GROUP BY partition_key`
	// sqlPruneClaims drops the claim times a Rate window no longer holds.
	// Arguments: queue, now-window.
	sqlPruneClaims = `DELETE FROM queue_claims WHERE queue = ? AND claimed_at <= ?`
	// sqlRateClaims counts the claims in (now-window, now]. Arguments:
	// queue, now-window, now.
	sqlRateClaims = `SELECT COUNT(*) FROM queue_claims WHERE queue = ? AND claimed_at > ? AND claimed_at <= ?`
	// sqlRecordClaim records one claim time for Rate.
	sqlRecordClaim = `INSERT INTO queue_claims (queue, claimed_at) VALUES (?, ?)`
	// sqlReadyInOrder walks a queue's ready items in claim order (the
	// queue_items_order index). Arguments: queue, now, tenant, tenant.
	sqlReadyInOrder = `SELECT execution_id, partition_key FROM queue_items
	WHERE queue = ? AND done = 0 AND (owner IS NULL OR expires_at <= ?) AND (? = '' OR tenant = ?)
	ORDER BY priority DESC, enqueued_at, execution_id`
	// sqlGrant claims one item. Arguments: owner, now, expiry, queue,
	// execution id.
	sqlGrant = `UPDATE queue_items SET owner = ?, token = token + 1, claimed_at = ?, expires_at = ?
	WHERE queue = ? AND execution_id = ? RETURNING ` + queueItemCols + `, token`
	// sqlRenewClaim, sqlCompleteClaim and sqlReleaseClaim change the row
	// iff c is its current claim (owner and token); sqlRenewClaim also iff
	// it is live at now. 0 rows means the claim was lost.
	sqlRenewClaim = `UPDATE queue_items SET expires_at = ?
	WHERE queue = ? AND execution_id = ? AND done = 0 AND owner = ? AND token = ? AND expires_at > ?
	RETURNING claimed_at`
	sqlCompleteClaim = `UPDATE queue_items SET done = 1, owner = NULL
	WHERE queue = ? AND execution_id = ? AND done = 0 AND owner = ? AND token = ?`
	sqlReleaseClaim = `UPDATE queue_items SET owner = NULL
	WHERE queue = ? AND execution_id = ? AND done = 0 AND owner = ? AND token = ?`
	// sqlReadyTenants lists the non-empty tenants with an item ready at now.
	sqlReadyTenants = `SELECT DISTINCT tenant FROM queue_items
	WHERE queue = ? AND done = 0 AND (owner IS NULL OR expires_at <= ?) AND tenant <> '' ORDER BY tenant`
	// sqlQueueDepth counts a queue's items: all, done, and live claims.
	sqlQueueDepth = `SELECT COUNT(*), COALESCE(SUM(done = 1), 0),
	COALESCE(SUM(done = 0 AND owner IS NOT NULL AND expires_at > ?), 0)
	FROM queue_items WHERE queue = ?`
)

// Enqueue implements store.QueueStore: it stores item and reports true,
// or reports false and changes nothing when the queue holds
// item.ExecutionID already, done or not, in one durable transaction. It
// refuses what store.ValidateQueueItem refuses, writing nothing. Input and
// Meta are stored as the text given, an empty one as absent.
func (s *QueueStore) Enqueue(ctx context.Context, item store.QueueItem) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if err := store.ValidateQueueItem(item); err != nil {
		return false, err
	}
	var n int64
	err := s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() (err error) {
			n, err = c.exec(sqlEnqueue, item.Queue, item.ExecutionID, item.FlowID, optionalText(item.Input),
				item.Tenant, int64(item.Priority), item.PartitionKey, item.EnqueuedAt, optionalText(item.Meta))
			return err
		})
	})
	return n > 0, err
}

// Claim implements store.QueueStore: in one write transaction it counts
// the queue's live claims at req.Now (and its Rate window), then grants
// ready items in priority order while every limit allows, skipping an item
// whose partition is full. It refuses what store.ValidateClaimRequest
// refuses, and a Now+TTL past math.MaxInt64, claiming nothing.
func (s *QueueStore) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := store.ValidateClaimRequest(req); err != nil {
		return nil, err
	}
	if req.Now > math.MaxInt64-req.TTL {
		return nil, &store.QueueLimitsError{Field: "TTL", Problem: "overflows Now+TTL"}
	}
	var out []store.Claim
	err := s.db.w.run(ctx, func(c *rawConn) error {
		out = out[:0]
		return c.inTx(func() (err error) {
			out, err = claimInTx(c, req)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimInTx is Claim's transaction.
func claimInTx(c *rawConn, req store.ClaimRequest) ([]store.Claim, error) {
	b, err := countBudget(c, req)
	if err != nil || b.room == 0 {
		return nil, err
	}
	var chosen []string
	err = eachRow(c, func(row []driver.Value) (bool, error) {
		id, okID := row[0].(string)
		part, okPart := row[1].(string)
		if !okID || !okPart {
			return false, fmt.Errorf("sqlite: queue item row holds %T, %T", row[0], row[1])
		}
		if part != "" && req.Limits.PerPartition > 0 {
			if b.partitions[part] >= req.Limits.PerPartition {
				return true, nil // its partition is full; a later item's may not be
			}
			b.partitions[part]++
		}
		chosen = append(chosen, id)
		return len(chosen) < b.room, nil
	}, sqlReadyInOrder, req.Queue, req.Now, req.Tenant, req.Tenant)
	if err != nil {
		return nil, err
	}
	out := make([]store.Claim, 0, len(chosen))
	for _, id := range chosen {
		row, found, err := c.queryRow(sqlGrant, req.Owner, req.Now, req.Now+req.TTL, req.Queue, id)
		if err == nil && !found {
			err = fmt.Errorf("sqlite: queue item %q vanished inside its claim", id)
		}
		if err != nil {
			return nil, err
		}
		item, err := itemFromRow(row)
		token, ok := row[len(row)-1].(int64)
		if err == nil && !ok {
			err = fmt.Errorf("sqlite: queue item token is %T", row[len(row)-1])
		}
		if err != nil {
			return nil, err
		}
		out = append(out, store.Claim{Item: item, Owner: req.Owner, Token: token, ClaimedAt: req.Now,
			ExpiresAt: req.Now + req.TTL, Attempt: int(token)})
		if req.Limits.Rate > 0 {
			if _, err := c.exec(sqlRecordClaim, req.Queue, req.Now); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// claimBudget is what one Claim may still grant: room items in all, and
// per partition key the live claims counted so far.
type claimBudget struct {
	room       int
	partitions map[string]int
}

// countBudget counts, inside Claim's transaction, the live claims and the
// Rate window that req's limits bound, pruning claim times the window no
// longer holds.
func countBudget(c *rawConn, req store.ClaimRequest) (claimBudget, error) {
	l := req.Limits
	b := claimBudget{room: req.Max, partitions: make(map[string]int)}
	row, _, err := c.queryRow(sqlLiveClaims, req.Owner, req.Queue, req.Now)
	if err != nil {
		return b, err
	}
	live, okLive := row[0].(int64)
	mine, okMine := row[1].(int64)
	if !okLive || !okMine {
		return b, fmt.Errorf("sqlite: live claim counts are %T, %T", row[0], row[1])
	}
	shrink := func(limit int, used int64) {
		if limit > 0 {
			b.room = max(0, min(b.room, limit-int(used)))
		}
	}
	shrink(l.Concurrency, live)
	shrink(l.PerOwner, mine)
	if l.Rate > 0 && b.room > 0 {
		since := req.Now - l.RateWindow
		if _, err := c.exec(sqlPruneClaims, req.Queue, since); err != nil {
			return b, err
		}
		n, _, err := c.queryInt64(sqlRateClaims, req.Queue, since, req.Now)
		if err != nil {
			return b, err
		}
		shrink(l.Rate, n)
	}
	if l.PerPartition > 0 && b.room > 0 {
		err = eachRow(c, func(row []driver.Value) (bool, error) {
			key, okKey := row[0].(string)
			n, okN := row[1].(int64)
			if !okKey || !okN {
				return false, fmt.Errorf("sqlite: partition counts are %T, %T", row[0], row[1])
			}
			b.partitions[key] = int(n)
			return true, nil
		}, sqlLivePartitions, req.Queue, req.Now)
	}
	return b, err
}

// Renew implements store.QueueStore: iff c is its item's current claim
// (Owner and Token) and live at now, it moves ExpiresAt to now+ttl,
// durably, keeping Token, Attempt and ClaimedAt; otherwise
// store.ErrClaimLost, changing nothing. A ttl below 1 (or a now+ttl past
// math.MaxInt64) is refused with *store.QueueLimitsError.
func (s *QueueStore) Renew(ctx context.Context, c store.Claim, now, ttl int64) (store.Claim, error) {
	if err := s.check(); err != nil {
		return store.Claim{}, err
	}
	if ttl < 1 || now > math.MaxInt64-ttl {
		return store.Claim{}, &store.QueueLimitsError{Field: "TTL", Problem: "must be positive, and now+ttl must fit int64"}
	}
	var claimedAt int64
	var found bool
	err := s.db.w.run(ctx, func(rc *rawConn) error {
		return rc.inTx(func() (err error) {
			claimedAt, found, err = rc.queryInt64(sqlRenewClaim, now+ttl, c.Item.Queue, c.Item.ExecutionID,
				c.Owner, c.Token, now)
			return err
		})
	})
	if err != nil {
		return store.Claim{}, err
	}
	if !found {
		return store.Claim{}, store.ErrClaimLost
	}
	c.ClaimedAt, c.ExpiresAt, c.Attempt = claimedAt, now+ttl, int(c.Token)
	return c, nil
}

// Complete implements store.QueueStore: iff c is its item's current claim
// (Owner and Token) it marks the item done, durably; otherwise
// store.ErrClaimLost. Complete takes no time, so a claim that expired but
// was not taken over still completes.
func (s *QueueStore) Complete(ctx context.Context, c store.Claim) error {
	return s.endClaim(ctx, sqlCompleteClaim, c)
}

// Release implements store.QueueStore: iff c is its item's current claim
// (Owner and Token) the item is ready at once, durably; otherwise
// store.ErrClaimLost. The claim still counts toward a Rate window.
func (s *QueueStore) Release(ctx context.Context, c store.Claim) error {
	return s.endClaim(ctx, sqlReleaseClaim, c)
}

// endClaim runs Complete's or Release's conditional UPDATE.
func (s *QueueStore) endClaim(ctx context.Context, q string, c store.Claim) error {
	if err := s.check(); err != nil {
		return err
	}
	var n int64
	err := s.db.w.run(ctx, func(rc *rawConn) error {
		return rc.inTx(func() (err error) {
			n, err = rc.exec(q, c.Item.Queue, c.Item.ExecutionID, c.Owner, c.Token)
			return err
		})
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrClaimLost
	}
	return nil
}

// ReadyTenants implements store.QueueStore: the distinct non-empty tenants
// with an item of queue ready at now, in code-point order.
func (s *QueueStore) ReadyTenants(ctx context.Context, queue string, now int64) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.db.read.QueryContext(ctx, sqlReadyTenants, queue, now)
	if err != nil {
		return nil, s.db.readErr("ready tenants", err)
	}
	var out []string
	for rows.Next() {
		var tenant string
		if err := rows.Scan(&tenant); err != nil {
			return nil, errors.Join(s.db.readErr("ready tenants", err), rows.Close())
		}
		out = append(out, tenant)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, s.db.readErr("ready tenants", err)
	}
	return out, nil
}

// Depth implements store.QueueStore: queue's items at now, by state.
func (s *QueueStore) Depth(ctx context.Context, queue string, now int64) (store.QueueDepth, error) {
	if err := s.check(); err != nil {
		return store.QueueDepth{}, err
	}
	var all, done, claimed int
	err := s.db.read.QueryRowContext(ctx, sqlQueueDepth, now, queue).Scan(&all, &done, &claimed)
	if err != nil {
		return store.QueueDepth{}, s.db.readErr("queue depth", err)
	}
	return store.QueueDepth{Ready: all - done - claimed, Claimed: claimed, Done: done}, nil
}

// Close implements store.QueueStore: later calls return store.ErrClosed. A
// store from OpenQueueStore closes its DB; one from DB.QueueStore only
// detaches. A second Close returns nil.
func (s *QueueStore) Close() error { return s.close() }

// itemFromRow reads the queueItemCols of a driver row.
func itemFromRow(row []driver.Value) (store.QueueItem, error) {
	var it store.QueueItem
	texts := []*string{&it.Queue, &it.ExecutionID, &it.FlowID, nil, &it.Tenant, nil, &it.PartitionKey}
	for i, dst := range texts {
		if dst == nil {
			continue
		}
		v, ok := row[i].(string)
		if !ok {
			return it, fmt.Errorf("sqlite: queue item column %d is %T", i, row[i])
		}
		*dst = v
	}
	prio, okPrio := row[5].(int64)
	enq, okEnq := row[7].(int64)
	if !okPrio || !okEnq {
		return it, fmt.Errorf("sqlite: queue item priority and enqueue time are %T, %T", row[5], row[7])
	}
	it.Priority, it.EnqueuedAt = int(prio), enq
	input, err := textValue(row[3])
	if err != nil {
		return it, err
	}
	meta, err := textValue(row[8])
	if len(input) > 0 {
		it.Input = json.RawMessage(input)
	}
	if len(meta) > 0 {
		it.Meta = json.RawMessage(meta)
	}
	return it, err
}

// optionalText binds raw as TEXT, or NULL when it is empty.
func optionalText(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
}

// textValue reads a nullable TEXT (or BLOB) driver value.
func textValue(v driver.Value) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	}
	return "", fmt.Errorf("sqlite: text column holds %T", v)
}

// eachRow runs q on the write connection and calls fn with each row until
// fn reports false or fails. The row is reused between calls.
func eachRow(c *rawConn, fn func(row []driver.Value) (bool, error), q string, vals ...any) error {
	st, err := c.stmt(q)
	if err != nil {
		return err
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(context.Background(), c.bind(vals))
	if err != nil {
		return err
	}
	row := make([]driver.Value, len(rows.Columns()))
	for {
		switch err := rows.Next(row); {
		case errors.Is(err, io.EOF):
			return rows.Close()
		case err != nil:
			return errors.Join(err, rows.Close())
		}
		more, err := fn(row)
		if err != nil || !more {
			return errors.Join(err, rows.Close())
		}
	}
}

// OpenQueueStore is OpenEventStore for a QueueStore that owns its database
// file.
func OpenQueueStore(path string, opts ...Option) (*QueueStore, error) {
	db, err := Open(path, opts...)
	if err != nil {
		return nil, err
	}
	return &QueueStore{view: view{db: db, owned: true}}, nil
}
