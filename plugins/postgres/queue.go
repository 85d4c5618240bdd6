package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/store"
)

// MaxQueueClaimBatch bounds the items one Claim hands out, whatever
// ClaimRequest.Max asks for: a claim is one transaction holding the queue's
// lock, and a bounded batch keeps it short.
const MaxQueueClaimBatch = 1000

// QueueStore keeps the durable start queues of a DB in three tables
// (migration 8) and implements store.QueueStore across every node sharing
// the schema:
//
//   - queues: one row per queue, inserted by its first Enqueue. Claim locks
//     it (SELECT … FOR UPDATE) for its whole transaction, so the claims of
//     one queue are serialized across all nodes: each claimer counts the
//     live claims after the previous one committed, which is what makes the
//     limits hold however many nodes claim at once.
//   - queue_items: one row per (queue, execution_id), kept when done, so
//     Enqueue is idempotent for as long as the row lives. A row is ready,
//     claimed (owner, token, claimed_at, expires_at) or done; a claimed row
//     whose expires_at <= now is ready again.
//   - queue_claims: the claim times Rate is checked against, per queue and
//     millisecond with a count, pruned to the newest Rate claims (the only
//     ones a check can need). Recorded only when the claim passes a Rate.
//
// Every method is one transaction committed before it returns (with
// synchronous_commit on, flushed to the WAL): a crash before the commit
// leaves the queue as it was, after it the whole change. Renew, Complete
// and Release are single conditional UPDATEs on the claim's owner and
// token; tokens grow by one with every claim of an item and are kept by
// Release, so a superseded claim never matches again. Ids, tenants and
// partition keys are text COLLATE "C" (byte order); Input and Meta are
// bytea, returned as given.
//
// One from DB.QueueStore shares its DB, and Close only detaches it; one
// from OpenQueueStore owns its DB, and Close closes it.
type QueueStore struct {
	view
	q queueQueries
}

var _ store.QueueStore = (*QueueStore)(nil)

// QueueStore returns a view of the start queues. Closing it does not close db.
func (db *DB) QueueStore() *QueueStore {
	return &QueueStore{view: view{db: db}, q: buildQueueQueries(pgx.Identifier{db.schema}.Sanitize())}
}

// OpenQueueStore is OpenEventStore for a QueueStore that owns its DB.
func OpenQueueStore(ctx context.Context, opts Options) (*QueueStore, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	s := db.QueueStore()
	s.owned = true
	return s, nil
}

// Enqueue implements store.QueueStore: one INSERT … ON CONFLICT DO NOTHING
// on (queue, execution_id), so it reports true iff this call stored the
// item, and false for an item the store holds in any state (the stored one
// is left as it is). The same statement inserts the queue's row on first
// use. Before anything is written it refuses, with *store.QueueItemError,
// what store.ValidateQueueItem refuses and a text field PostgreSQL cannot
// hold (a NUL byte or invalid UTF-8).
func (s *QueueStore) Enqueue(ctx context.Context, item store.QueueItem) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if err := validateQueueText(item); err != nil {
		return false, err
	}
	tag, err := s.db.pool.Exec(ctx, s.q.enqueue, item.Queue, item.ExecutionID, item.FlowID,
		nullBytes(item.Input), item.Tenant, int64(item.Priority), item.PartitionKey, item.EnqueuedAt, nullBytes(item.Meta))
	if err != nil {
		return false, s.readErr("enqueue", err)
	}
	return tag.RowsAffected() == 1, nil
}

// validateQueueText is store.ValidateQueueItem plus the refusal of text
// that a PostgreSQL text column cannot store.
func validateQueueText(item store.QueueItem) error {
	if err := store.ValidateQueueItem(item); err != nil {
		return err
	}
	for _, f := range []struct{ name, value string }{
		{"Queue", item.Queue}, {"ExecutionID", item.ExecutionID}, {"FlowID", item.FlowID},
		{"Tenant", item.Tenant}, {"PartitionKey", item.PartitionKey},
	} {
		if !pgText(f.value) {
			return &store.QueueItemError{Field: f.name, Problem: "holds a NUL byte or invalid UTF-8"}
		}
	}
	return nil
}

// Claim implements store.QueueStore in one transaction: it locks the
// queue's row, counts the live claims (of the queue, of req.Owner) and the
// recorded claims in the rate window, and hands out at most the room the
// limits leave (and at most MaxQueueClaimBatch): the ready items, in
// priority DESC, enqueued_at, execution_id order, of req.Tenant when set,
// skipping those of a partition at its limit. Each is locked with
// FOR UPDATE SKIP LOCKED, marked claimed by req.Owner until req.Now+req.TTL
// with its token and attempt one higher. A queue never enqueued to, or at
// a limit, hands out nothing, without an error.
//
// Rate is checked conservatively against a caller clock that may step
// back: a claim at now counts every recorded claim after now-RateWindow,
// later ones included, so no window ending at any claim's time ever holds
// more than Rate claims. Before anything is read it refuses what
// store.ValidateClaimRequest refuses, an owner PostgreSQL text cannot hold
// (*store.QueueItemError) and a Now+TTL past math.MaxInt64
// (*store.QueueLimitsError); a queue or tenant no item can have claims
// nothing. A failure rolls everything back: no item is claimed.
func (s *QueueStore) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := validateClaim(req); err != nil {
		return nil, err
	}
	if !pgText(req.Queue) || !pgText(req.Tenant) {
		return nil, nil
	}
	var out []store.Claim
	err := inTx(ctx, s.db.pool, func(tx pgx.Tx) error {
		var err error
		out, err = s.claimTx(ctx, tx, req)
		return err
	})
	if err != nil {
		return nil, s.readErr("claim", err)
	}
	return out, nil
}

// validateClaim is store.ValidateClaimRequest plus what PostgreSQL and
// int64 need of it.
func validateClaim(req store.ClaimRequest) error {
	if err := store.ValidateClaimRequest(req); err != nil {
		return err
	}
	if !pgText(req.Owner) {
		return &store.QueueItemError{Field: "Owner", Problem: "holds a NUL byte or invalid UTF-8"}
	}
	return checkExpiry(req.Now, req.TTL)
}

// checkExpiry refuses a ttl below 1 and a now+ttl that int64 cannot hold.
func checkExpiry(now, ttl int64) error {
	if ttl <= 0 {
		return &store.QueueLimitsError{Field: "TTL", Problem: "must be positive"}
	}
	if now > math.MaxInt64-ttl {
		return &store.QueueLimitsError{Field: "TTL", Problem: "makes Now+TTL overflow int64"}
	}
	return nil
}

// claimTx is Claim inside its transaction.
func (s *QueueStore) claimTx(ctx context.Context, tx pgx.Tx, req store.ClaimRequest) ([]store.Claim, error) {
	// The lock first, in a statement of its own: every later statement
	// takes a new snapshot, which holds every claim committed by the
	// previous holder of the lock.
	var locked int
	if err := tx.QueryRow(ctx, s.q.lockQueue, req.Queue).Scan(&locked); errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // never enqueued to: nothing to claim
	} else if err != nil {
		return nil, err
	}
	room, err := s.room(ctx, tx, req)
	if err != nil || room <= 0 {
		return nil, err
	}
	var partitions map[string]int
	if req.Limits.PerPartition > 0 {
		if partitions, err = s.livePartitions(ctx, tx, req); err != nil {
			return nil, err
		}
	}
	var out []store.Claim
	// The partitions at their limit; never nil, so it binds an empty array.
	full := append([]string{}, sortedFull(partitions, req.Limits.PerPartition)...)
	for len(out) < room {
		page, err := s.readyPage(ctx, tx, req, full, room-len(out))
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		var took []store.Claim
		for _, c := range page {
			if len(out)+len(took) == room {
				break
			}
			if k := c.Item.PartitionKey; k != "" && req.Limits.PerPartition > 0 {
				if partitions[k] >= req.Limits.PerPartition {
					continue // filled by this page; excluded from the next
				}
				if partitions[k]++; partitions[k] == req.Limits.PerPartition {
					full = append(full, k)
				}
			}
			took = append(took, c)
		}
		if len(took) == 0 {
			// Unreachable (a page holds no excluded partition, and one it
			// fills took an item first); the guard bounds the loop anyway.
			break
		}
		if err := s.mark(ctx, tx, req, took); err != nil {
			return nil, err
		}
		out = append(out, took...)
	}
	if len(out) > 0 && req.Limits.Rate > 0 {
		if err := s.recordClaims(ctx, tx, req, len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// room is how many items the limits let this claim hand out.
func (s *QueueStore) room(ctx context.Context, tx pgx.Tx, req store.ClaimRequest) (int, error) {
	var live, mine, recent int64
	err := tx.QueryRow(ctx, s.q.counts, req.Queue, req.Now, req.Owner, rateFloor(req)).Scan(&live, &mine, &recent)
	if err != nil {
		return 0, err
	}
	room := int64(min(req.Max, MaxQueueClaimBatch))
	l := req.Limits
	if l.Concurrency > 0 {
		room = min(room, int64(l.Concurrency)-live)
	}
	if l.PerOwner > 0 {
		room = min(room, int64(l.PerOwner)-mine)
	}
	if l.Rate > 0 {
		room = min(room, int64(l.Rate)-recent)
	}
	return int(max(room, 0)), nil
}

// rateFloor is the exclusive lower end of the rate window of a claim at
// req.Now (MinInt64 when Now-RateWindow underflows; unused without Rate).
func rateFloor(req store.ClaimRequest) int64 {
	w := req.Limits.RateWindow
	if req.Now < math.MinInt64+w {
		return math.MinInt64
	}
	return req.Now - w
}

// livePartitions counts the live claims of the queue per partition key.
func (s *QueueStore) livePartitions(ctx context.Context, tx pgx.Tx, req store.ClaimRequest) (map[string]int, error) {
	rows, err := tx.Query(ctx, s.q.livePartitions, req.Queue, req.Now)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	var key string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&key, &n}, func() error {
		counts[key] = n
		return nil
	})
	return counts, err
}

// sortedFull lists the partitions whose count reached limit, sorted (so
// the statement binds the same array for the same state).
func sortedFull(counts map[string]int, limit int) []string {
	var full []string
	for k, n := range counts {
		if n >= limit {
			full = append(full, k)
		}
	}
	sort.Strings(full)
	return full
}

// readyPage locks and reads up to n ready items of the queue in claim
// order, skipping rows another transaction holds and the partitions in
// full. The claims it returns carry the item's next token and attempt.
func (s *QueueStore) readyPage(ctx context.Context, tx pgx.Tx, req store.ClaimRequest, full []string, n int) ([]store.Claim, error) {
	sql, args := s.q.readyAny, []any{req.Queue, req.Now, full, n}
	if req.Tenant != "" {
		sql, args = s.q.readyTenant, append(args, req.Tenant)
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var page []store.Claim
	var it store.QueueItem
	var priority, token, attempt int64
	var input, meta []byte
	_, err = pgx.ForEachRow(rows, []any{&it.ExecutionID, &it.FlowID, &input, &it.Tenant, &priority,
		&it.PartitionKey, &it.EnqueuedAt, &meta, &token, &attempt}, func() error {
		it.Queue, it.Priority = req.Queue, int(priority)
		it.Input, it.Meta = rawJSON(input), rawJSON(meta)
		page = append(page, store.Claim{Item: it, Owner: req.Owner, Token: token + 1,
			ClaimedAt: req.Now, ExpiresAt: req.Now + req.TTL, Attempt: int(attempt) + 1})
		return nil
	})
	return page, err
}

// mark records the claims of took, whose rows this transaction locked.
func (s *QueueStore) mark(ctx context.Context, tx pgx.Tx, req store.ClaimRequest, took []store.Claim) error {
	if len(took) == 0 {
		return nil
	}
	ids := make([]string, len(took))
	for i, c := range took {
		ids[i] = c.Item.ExecutionID
	}
	tag, err := tx.Exec(ctx, s.q.markClaimed, req.Queue, ids, req.Owner, req.Now, req.Now+req.TTL)
	if err != nil {
		return err
	}
	if int(tag.RowsAffected()) != len(took) {
		return fmt.Errorf("postgres: claim marked %d of %d locked items", tag.RowsAffected(), len(took))
	}
	return nil
}

// recordClaims adds n claims at req.Now to the queue's claim times and
// prunes those older than the newest Rate.
func (s *QueueStore) recordClaims(ctx context.Context, tx pgx.Tx, req store.ClaimRequest, n int) error {
	if _, err := tx.Exec(ctx, s.q.recordClaims, req.Queue, req.Now, n); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, s.q.pruneClaims, req.Queue, req.Limits.Rate)
	return err
}

// Renew implements store.QueueStore: iff c is the item's claim (same owner
// and token, still claimed) and live at now (expires_at > now), it sets
// ExpiresAt to now+ttl, durably, and returns c with it. Otherwise it
// returns store.ErrClaimLost, changing nothing. A ttl below 1 or a now+ttl
// past math.MaxInt64 is refused with *store.QueueLimitsError.
func (s *QueueStore) Renew(ctx context.Context, c store.Claim, now, ttl int64) (store.Claim, error) {
	if err := s.check(); err != nil {
		return store.Claim{}, err
	}
	if err := checkExpiry(now, ttl); err != nil {
		return store.Claim{}, err
	}
	if !claimText(c) {
		return store.Claim{}, store.ErrClaimLost
	}
	tag, err := s.db.pool.Exec(ctx, s.q.renew, c.Item.Queue, c.Item.ExecutionID, c.Owner, c.Token, now, now+ttl)
	if err != nil {
		return store.Claim{}, s.readErr("renew claim", err)
	}
	if tag.RowsAffected() == 0 {
		return store.Claim{}, store.ErrClaimLost
	}
	c.ExpiresAt = now + ttl
	return c, nil
}

// Complete implements store.QueueStore: iff c is the item's claim (same
// owner and token, still claimed) it marks the item done, durably, which
// frees its slot; otherwise store.ErrClaimLost, changing nothing. The SPI
// gives Complete no clock, so a claim that expired but that nobody took
// over (its token still current) completes.
func (s *QueueStore) Complete(ctx context.Context, c store.Claim) error {
	return s.endClaim(ctx, c, s.q.complete, "complete claim")
}

// Release implements store.QueueStore: iff c is the item's claim (as for
// Complete) it returns the item to ready at once, keeping its token and
// attempt so the next claim outranks c; otherwise store.ErrClaimLost.
func (s *QueueStore) Release(ctx context.Context, c store.Claim) error {
	return s.endClaim(ctx, c, s.q.release, "release claim")
}

// endClaim runs the conditional update sql on c's item.
func (s *QueueStore) endClaim(ctx context.Context, c store.Claim, sql, op string) error {
	if err := s.check(); err != nil {
		return err
	}
	if !claimText(c) {
		return store.ErrClaimLost
	}
	tag, err := s.db.pool.Exec(ctx, sql, c.Item.Queue, c.Item.ExecutionID, c.Owner, c.Token)
	if err != nil {
		return s.readErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrClaimLost
	}
	return nil
}

// claimText reports whether c's keys could be stored: one that could not
// is no claim this store handed out.
func claimText(c store.Claim) bool {
	return pgText(c.Item.Queue) && pgText(c.Item.ExecutionID) && pgText(c.Owner)
}

// ReadyTenants implements store.QueueStore: the distinct non-empty
// tenants of the queue's ready items at now (expired claims included), in
// byte order ("" is no tenant, so untenanted items are not listed; a
// Claim without Tenant reaches them).
func (s *QueueStore) ReadyTenants(ctx context.Context, queue string, now int64) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if !pgText(queue) {
		return nil, nil
	}
	rows, err := s.db.pool.Query(ctx, s.q.readyTenants, queue, now)
	if err != nil {
		return nil, s.readErr("ready tenants", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.readErr("ready tenants", err)
	}
	return out, nil
}

// Depth implements store.QueueStore: the queue's items at now, counted in
// one statement (one snapshot): Ready holds the expired claims, Claimed
// the live ones.
func (s *QueueStore) Depth(ctx context.Context, queue string, now int64) (store.QueueDepth, error) {
	if err := s.check(); err != nil {
		return store.QueueDepth{}, err
	}
	var d store.QueueDepth
	if !pgText(queue) {
		return d, nil
	}
	if err := s.db.pool.QueryRow(ctx, s.q.depth, queue, now).Scan(&d.Ready, &d.Claimed, &d.Done); err != nil {
		return store.QueueDepth{}, s.readErr("queue depth", err)
	}
	return d, nil
}

// Close implements store.QueueStore: later calls return store.ErrClosed. A
// store from OpenQueueStore closes its DB; one from DB.QueueStore only
// detaches. A second Close returns nil.
func (s *QueueStore) Close() error { return s.close() }

// nullBytes binds an empty payload as NULL.
func nullBytes(b json.RawMessage) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// rawJSON returns a scanned payload, nil when NULL, as its own copy.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// queueQueries are the QueueStore's statements with the schema filled in.
type queueQueries struct {
	enqueue, lockQueue, counts, livePartitions, readyAny, readyTenant string
	markClaimed, recordClaims, pruneClaims, renew, complete, release  string
	readyTenants, depth                                               string
}

// queueItemCols are the columns readyPage scans, in its order.
const queueItemCols = `execution_id, flow_id, input, tenant, priority, partition_key, enqueued_at, meta, token, attempt`

// queueReady is the condition of a ready item at $2: never claimed,
// released, or its claim expired.
const queueReady = `state <> 'done' AND (state = 'ready' OR expires_at <= $2::bigint)`

// queueLive is the condition of a live claim at $2.
const queueLive = `state = 'claimed' AND expires_at > $2::bigint`

// buildQueueQueries fills the schema s (already quoted) into every
// QueueStore statement.
func buildQueueQueries(s string) queueQueries {
	items := s + `.queue_items`
	// readyPage's statement: the ready items of the queue outside the full
	// partitions ($3), in claim order, locked or skipped.
	ready := func(tenant string) string {
		return `SELECT ` + queueItemCols + ` FROM ` + items + `
			WHERE queue = $1 AND ` + queueReady + tenant + `
				AND (partition_key = '' OR partition_key <> ALL($3::text[]))
			ORDER BY priority DESC, enqueued_at, execution_id
			LIMIT $4
			FOR UPDATE SKIP LOCKED`
	}
	// The claim's conditions: $1 queue, $2 execution id, $3 owner, $4 token.
	const claimed = ` WHERE queue = $1 AND execution_id = $2 AND state = 'claimed' AND owner = $3 AND token = $4`
	return queueQueries{
		// The queue's row rides along with its first item: the row Claim
		// locks exists once an item does.
		enqueue: `WITH q AS (INSERT INTO ` + s + `.queues (queue) VALUES ($1) ON CONFLICT (queue) DO NOTHING)
			INSERT INTO ` + items + ` (queue, execution_id, flow_id, input, tenant, priority, partition_key, enqueued_at, meta, state)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'ready')
			ON CONFLICT (queue, execution_id) DO NOTHING`,
		lockQueue: `SELECT 1 FROM ` + s + `.queues WHERE queue = $1 FOR UPDATE`,
		counts: `SELECT
				(SELECT count(*) FROM ` + items + ` WHERE queue = $1 AND ` + queueLive + `),
				(SELECT count(*) FROM ` + items + ` WHERE queue = $1 AND ` + queueLive + ` AND owner = $3::text),
				(SELECT COALESCE(sum(claims), 0)::bigint FROM ` + s + `.queue_claims WHERE queue = $1 AND claimed_at > $4::bigint)`,
		livePartitions: `SELECT partition_key, count(*) FROM ` + items + `
			WHERE queue = $1 AND ` + queueLive + ` AND partition_key <> '' GROUP BY partition_key`,
		readyAny:    ready(""),
		readyTenant: ready(` AND tenant = $5::text`),
		markClaimed: `UPDATE ` + items + ` SET state = 'claimed', owner = $3, token = token + 1, attempt = attempt + 1,
				claimed_at = $4, expires_at = $5
			WHERE queue = $1 AND execution_id = ANY($2::text[])`,
		recordClaims: `INSERT INTO ` + s + `.queue_claims AS c (queue, claimed_at, claims) VALUES ($1, $2, $3)
			ON CONFLICT (queue, claimed_at) DO UPDATE SET claims = c.claims + EXCLUDED.claims`,
		// Keep the newest claim times that hold at least $2 (Rate) claims:
		// the rows below the newest time with $2 claims at or after it can
		// never decide a check (see Claim).
		pruneClaims: `DELETE FROM ` + s + `.queue_claims WHERE queue = $1 AND claimed_at < (
				SELECT max(claimed_at) FROM (
					SELECT claimed_at, sum(claims) OVER (ORDER BY claimed_at DESC) AS newer
					FROM ` + s + `.queue_claims WHERE queue = $1
				) r WHERE r.newer >= $2::bigint)`,
		renew:    `UPDATE ` + items + ` SET expires_at = $6::bigint` + claimed + ` AND expires_at > $5::bigint`,
		complete: `UPDATE ` + items + ` SET state = 'done'` + claimed,
		release:  `UPDATE ` + items + ` SET state = 'ready', owner = NULL, expires_at = NULL` + claimed,
		readyTenants: `SELECT DISTINCT tenant FROM ` + items + `
			WHERE queue = $1 AND tenant <> '' AND ` + queueReady + ` ORDER BY tenant`,
		depth: `SELECT
				count(*) FILTER (WHERE ` + queueReady + `),
				count(*) FILTER (WHERE ` + queueLive + `),
				count(*) FILTER (WHERE state = 'done')
			FROM ` + items + ` WHERE queue = $1`,
	}
}
