package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Defaults of QueueConfig.
const (
	DefaultClaimTTL    = 30 * time.Second
	DefaultPoll        = time.Second
	DefaultMaxInFlight = 64
	DefaultMaxAttempts = 50
)

// ErrQueueClosed is returned by Enqueue and RunOnce once Close has begun.
var ErrQueueClosed = errors.New("dispatch: queue closed")

// QueueConfig configures NewQueue. The defaults (the zero value of each
// field):
//
//   - Limits: none (every field zero);
//   - Owner: "queue-" and 16 random hex digits, new for each Queue;
//   - ClaimTTL: DefaultClaimTTL (30 s), renewed every ClaimTTL/3;
//   - Poll: DefaultPoll (1 s) between claim rounds when nothing wakes Run;
//   - MaxInFlight: Limits.PerOwner if set, else DefaultMaxInFlight (64);
//   - MaxAttempts: DefaultMaxAttempts (50) claims of one item;
//   - DispatchTimeout: none (a dispatch ends when its execution settles);
//   - Scheduler: FIFOScheduler{};
//   - Clock: time.Now;
//   - Logger: discards;
//   - OnSettled, OnReleased: none.
type QueueConfig struct {
	// Store holds the queue durably. Required. The Queue never closes it.
	Store store.QueueStore
	// Name is the queue's name in Store. Required.
	Name string
	// Dispatcher runs the start packages. Required.
	Dispatcher Dispatcher
	// Limits bound the claims (store.QueueLimits); every node claiming from
	// the queue must pass the same ones.
	Limits store.QueueLimits
	// Owner names this node's claims; it must differ between nodes.
	Owner       string
	ClaimTTL    time.Duration
	Poll        time.Duration
	MaxInFlight int
	// MaxAttempts bounds the claims of one item that end in a transient
	// failure: the claim that reaches it is completed and reported to
	// OnSettled with an *AttemptsExhaustedError instead of released.
	MaxAttempts int
	// DispatchTimeout, when set, bounds each Dispatch; a dispatch that
	// runs out is released and claimed again.
	DispatchTimeout time.Duration
	Scheduler       Scheduler
	// Clock stamps enqueues and claims and times renewals.
	Clock  func() time.Time
	Logger *slog.Logger
	// OnSettled is called once for each claim this Queue completed: with
	// the execution's result, or with the error that refused its start for
	// good (a duplicate the dispatcher reported as loom.ErrExecutionExists,
	// an unknown flow, an invalid package, a denial, attempts exhausted).
	// It runs on the dispatch's goroutine, after the slot is free.
	OnSettled func(store.Claim, ExecutionResult, error)
	// OnReleased is called once for each claim this Queue gave up without
	// completing it, with why: the item will be claimed again (a transient
	// dispatch failure, a store failure, a claim lost to another owner).
	OnReleased func(store.Claim, error)
}

// QueueConfigError refuses a QueueConfig: Field names it and Reason says
// what to do; Err is store.QueueLimits.Validate's error for bad limits.
// Nothing was built.
type QueueConfigError struct {
	Field  string
	Reason string
	Err    error
}

func (e *QueueConfigError) Error() string {
	msg := "dispatch: queue config " + e.Field + ": " + e.Reason
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

// Unwrap exposes the limits' own error, when there is one.
func (e *QueueConfigError) Unwrap() error { return e.Err }

// AttemptsExhaustedError is what OnSettled gets for an item whose claims
// failed transiently MaxAttempts times: the Queue stopped retrying it and
// completed it. Err is the last failure; the execution may exist (a
// failure can come after the worker acted), so read its state.
type AttemptsExhaustedError struct {
	ExecutionID string
	Attempts    int
	Err         error
}

func (e *AttemptsExhaustedError) Error() string {
	return "dispatch: queued start " + strconv.Quote(e.ExecutionID) + ": " +
		strconv.Itoa(e.Attempts) + " attempts failed, last: " + e.Err.Error()
}

// Unwrap exposes the last failure.
func (e *AttemptsExhaustedError) Unwrap() error { return e.Err }

// EnqueueRequest is one start to queue; see store.QueueItem for the fields.
// ExecutionID is the idempotency key; empty generates one.
type EnqueueRequest struct {
	ExecutionID  string
	FlowID       string
	Input        json.RawMessage
	Tenant       string
	Priority     int
	PartitionKey string
	Meta         json.RawMessage
}

// Queue is a durable start queue in front of a Dispatcher: Enqueue stores a
// start, Run claims ready starts under the limits, in the Scheduler's
// order, and dispatches each as a start package on its own goroutine.
//
// A claim lives while its Dispatch runs (renewed every ClaimTTL/3) and
// ends with it:
//
//   - a result (the execution parked or ended): Complete;
//   - a permanent refusal of the start (see OnSettled), or the
//     MaxAttempts-th transient failure: Complete, and OnSettled reports it;
//   - any other error (an unreachable worker, a failed store write, an open
//     circuit, a timeout): Release, and the item is claimed again.
//
// A duplicate is harmless by contract: the start package of an execution
// that exists reports its state. If this process dies, its claims expire
// and another node claims the items again. It is safe for concurrent use.
type Queue struct {
	cfg      QueueConfig
	localCap int

	round sync.Mutex // one claim round at a time: the Scheduler's contract

	mu      sync.Mutex
	live    map[*liveClaim]struct{} // the claims in flight
	closing bool
	running bool

	wg      sync.WaitGroup // dispatch goroutines
	wake    chan struct{}  // a slot freed: claim again
	stop    chan struct{}  // closed by Close
	runDone chan struct{}  // closed when Run returns
	abort   context.CancelFunc
	base    context.Context // cancelled when Close's ctx ends: aborts dispatches
	once    sync.Once
}

// liveClaim is one claim in flight; claim is renewed in place under q.mu.
type liveClaim struct {
	claim     store.Claim
	renewedAt time.Time
	cancel    context.CancelFunc
	lost      bool
}

// NewQueue validates cfg and builds a Queue; nothing is claimed until Run
// or RunOnce. It refuses a missing Store, Name or Dispatcher, a Name over
// store.MaxQueueNameLen, bad Limits and negative durations or counts with a
// *QueueConfigError.
func NewQueue(cfg QueueConfig) (*Queue, error) {
	refuse := func(field, reason string) (*Queue, error) {
		return nil, &QueueConfigError{Field: field, Reason: reason}
	}
	switch {
	case cfg.Store == nil:
		return refuse("Store", "a store.QueueStore is required")
	case cfg.Name == "":
		return refuse("Name", "the queue's name is required")
	case len(cfg.Name) > store.MaxQueueNameLen:
		return refuse("Name", "is longer than "+strconv.Itoa(store.MaxQueueNameLen)+" bytes")
	case cfg.Dispatcher == nil:
		return refuse("Dispatcher", "a Dispatcher to run the starts is required")
	case cfg.ClaimTTL < 0, cfg.Poll < 0, cfg.DispatchTimeout < 0:
		return refuse("ClaimTTL/Poll/DispatchTimeout", "must not be negative (zero means the default)")
	case cfg.ClaimTTL > 0 && cfg.ClaimTTL < 3*time.Millisecond:
		return refuse("ClaimTTL", "must be at least 3ms (it is renewed every ClaimTTL/3, in milliseconds)")
	case cfg.MaxInFlight < 0, cfg.MaxAttempts < 0:
		return refuse("MaxInFlight/MaxAttempts", "must not be negative (zero means the default)")
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, &QueueConfigError{Field: "Limits", Reason: "refused by the store's rules", Err: err}
	}
	if cfg.Owner == "" {
		cfg.Owner = "queue-" + randomHex(8)
	}
	if cfg.ClaimTTL == 0 {
		cfg.ClaimTTL = DefaultClaimTTL
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Scheduler == nil {
		cfg.Scheduler = FIFOScheduler{}
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	localCap := cfg.MaxInFlight
	switch {
	case localCap == 0 && cfg.Limits.PerOwner > 0:
		localCap = cfg.Limits.PerOwner
	case localCap == 0:
		localCap = DefaultMaxInFlight
	case cfg.Limits.PerOwner > 0:
		localCap = min(localCap, cfg.Limits.PerOwner)
	}
	base, abort := context.WithCancel(context.Background())
	return &Queue{
		cfg: cfg, localCap: localCap, live: map[*liveClaim]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), runDone: make(chan struct{}),
		base: base, abort: abort,
	}, nil
}

// Owner is the owner name this Queue claims under.
func (q *Queue) Owner() string { return q.cfg.Owner }

// Enqueue stores a start durably and returns its execution id; added is
// false when the queue already holds that id (done or not), which is left
// as it is. It refuses a start no worker could run (an invalid id, input
// that is not JSON, over MaxPayloadBytes) with a *PackageError, and what
// the store refuses with its *store.QueueItemError, storing nothing.
func (q *Queue) Enqueue(ctx context.Context, req EnqueueRequest) (executionID string, added bool, err error) {
	if q.isClosing() {
		return "", false, ErrQueueClosed
	}
	id := req.ExecutionID
	if id == "" {
		id = "q-" + randomHex(16)
	}
	pkg := ExecutionPackage{ExecutionID: id, FlowID: req.FlowID, Input: req.Input, Principal: q.principal(req.Tenant)}
	if err := pkg.Validate(); err != nil {
		return "", false, err
	}
	item := store.QueueItem{
		Queue: q.cfg.Name, ExecutionID: id, FlowID: req.FlowID, Input: req.Input,
		Tenant: req.Tenant, Priority: req.Priority, PartitionKey: req.PartitionKey,
		EnqueuedAt: q.cfg.Clock().UnixMilli(), Meta: req.Meta,
	}
	added, err = q.cfg.Store.Enqueue(ctx, item)
	if err != nil {
		return "", false, err
	}
	return id, added, nil
}

// principal is the starting principal of a tenant's queued start: the
// queue, for that tenant; none without a tenant.
func (q *Queue) principal(tenant string) json.RawMessage {
	if tenant == "" {
		return nil
	}
	raw, _ := json.Marshal(map[string]string{"id": "queue:" + q.cfg.Name, "tenant": tenant})
	return raw
}

// Depth counts the queue's items now (store.QueueStore.Depth).
func (q *Queue) Depth(ctx context.Context) (store.QueueDepth, error) {
	return q.cfg.Store.Depth(ctx, q.cfg.Name, q.cfg.Clock().UnixMilli())
}

// InFlight is the number of claims this Queue holds (dispatches running).
func (q *Queue) InFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.live)
}

// RunOnce is one round of Run: it renews the claims due for renewal on
// Clock, then, while slots are free, asks the Scheduler for a tenant among
// the ready ones (store.QueueStore.ReadyTenants), claims for it and starts
// a dispatch for each claim. Slots still free after the tenants' turns
// claim any item in the store's order, once a round: that is how items
// without a tenant, which ReadyTenants does not list, are claimed. It
// returns how many items it claimed; it never waits for a dispatch. A store
// failure ends the round with its error (the claims made so far are
// dispatched). After Close it returns ErrQueueClosed.
func (q *Queue) RunOnce(ctx context.Context) (claimed int, err error) {
	q.round.Lock()
	defer q.round.Unlock()
	if q.isClosing() {
		return 0, ErrQueueClosed
	}
	q.renewDue(ctx)
	free := q.free()
	if free == 0 {
		return 0, nil
	}
	ready, err := q.cfg.Store.ReadyTenants(ctx, q.cfg.Name, q.cfg.Clock().UnixMilli())
	if err != nil {
		return 0, err
	}
	// Each pass claims at least one item or drops a tenant, so the loop
	// ends within free + len(ready) passes.
	triedAny := false
	for free > 0 && len(ready) > 0 {
		tenant, ok := q.cfg.Scheduler.Pick(ready)
		if !ok {
			break
		}
		limit := 1
		if tenant == "" {
			limit, triedAny = free, true
		}
		n, err := q.claim(ctx, tenant, limit)
		q.cfg.Scheduler.Claimed(tenant, n)
		claimed += n
		free -= n
		if err != nil {
			return claimed, err
		}
		if n == 0 {
			if tenant == "" {
				return claimed, nil // nothing claimable for anyone: a limit holds
			}
			ready = deleteTenant(ready, tenant)
		}
	}
	if free > 0 && !triedAny {
		// Items without a tenant are not in ReadyTenants: claim them (and
		// whatever became ready since) in the store's order.
		n, err := q.claim(ctx, "", free)
		return claimed + n, err
	}
	return claimed, nil
}

// claim claims up to limit items for tenant ("" for any) and starts their
// dispatches.
func (q *Queue) claim(ctx context.Context, tenant string, limit int) (int, error) {
	claims, err := q.cfg.Store.Claim(ctx, store.ClaimRequest{
		Queue: q.cfg.Name, Owner: q.cfg.Owner, Now: q.cfg.Clock().UnixMilli(),
		TTL: q.cfg.ClaimTTL.Milliseconds(), Max: limit, Tenant: tenant, Limits: q.cfg.Limits,
	})
	if err != nil {
		return 0, err
	}
	if len(claims) > limit {
		// A store bug; dispatch what was asked for, and the rest expire.
		q.cfg.Logger.ErrorContext(ctx, "dispatch: queue store handed out more claims than asked for",
			"queue", q.cfg.Name, "asked", limit, "got", len(claims))
		claims = claims[:limit]
	}
	for _, c := range claims {
		q.dispatch(ctx, c)
	}
	return len(claims), nil
}

func deleteTenant(ready []string, tenant string) []string {
	out := make([]string, 0, len(ready))
	for _, t := range ready {
		if t != tenant {
			out = append(out, t)
		}
	}
	return out
}

// free is the number of claims this Queue may still take.
func (q *Queue) free() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(0, q.localCap-len(q.live))
}

// Run claims and dispatches until ctx ends or Close is called, waking when
// a dispatch completes its claim and otherwise every Poll (or ClaimTTL/3, if
// shorter, to renew). A failed round is logged and retried at the next
// wake. Then it stops claiming and waits for the dispatches in flight,
// still renewing their claims, and returns nil (ctx's end is not a
// failure). Bound the wait with DispatchTimeout, or with Close's ctx.
// Run may be called once.
func (q *Queue) Run(ctx context.Context) error {
	q.mu.Lock()
	if q.running || q.closing {
		q.mu.Unlock()
		return errors.New("dispatch: queue Run called twice or after Close")
	}
	q.running = true
	q.mu.Unlock()
	defer close(q.runDone)
	timer := time.NewTimer(q.interval())
	defer timer.Stop()
	for {
		if _, err := q.RunOnce(ctx); err != nil && !errors.Is(err, ErrQueueClosed) && ctx.Err() == nil {
			q.cfg.Logger.WarnContext(ctx, "dispatch: queue round failed", "queue", q.cfg.Name, "err", err)
		}
		timer.Reset(q.interval())
		select {
		case <-ctx.Done():
			q.drain(context.WithoutCancel(ctx))
			return nil
		case <-q.stop:
			q.drain(context.WithoutCancel(ctx))
			return nil
		case <-q.wake:
		case <-timer.C:
		}
	}
}

func (q *Queue) interval() time.Duration { return min(q.cfg.Poll, q.cfg.ClaimTTL/3) }

// drain renews the live claims until no dispatch is in flight.
func (q *Queue) drain(ctx context.Context) {
	idle := make(chan struct{})
	go func() { q.wg.Wait(); close(idle) }()
	timer := time.NewTimer(q.cfg.ClaimTTL / 3)
	defer timer.Stop()
	for {
		select {
		case <-idle:
			return
		case <-q.wake:
		case <-timer.C:
			q.renewDue(ctx)
			timer.Reset(q.cfg.ClaimTTL / 3)
		}
	}
}

// Close stops claiming (Enqueue and RunOnce then return ErrQueueClosed)
// and waits for the dispatches in flight, renewing their claims. If ctx
// ends first, it cancels them — their claims are released, so another node
// claims the items again — waits for them to return and returns ctx's
// error. It does not close the store.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	running := q.running
	q.closing = true
	q.mu.Unlock()
	q.once.Do(func() { close(q.stop) })
	done := make(chan struct{})
	go func() {
		if running {
			<-q.runDone
		} else {
			q.drain(context.WithoutCancel(ctx))
		}
		close(done)
	}()
	select {
	case <-done:
		q.abort()
		return nil
	case <-ctx.Done():
		q.abort()
		<-done
		return ctx.Err()
	}
}

func (q *Queue) isClosing() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closing
}

// dispatch runs c's start package on its own goroutine. The package's ctx
// keeps ctx's values but not its cancellation: a round's ctx ending does
// not abort dispatches, Close's does.
func (q *Queue) dispatch(ctx context.Context, c store.Claim) {
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopAbort := context.AfterFunc(q.base, cancel)
	if q.cfg.DispatchTimeout > 0 {
		var cancelTimeout context.CancelFunc
		dctx, cancelTimeout = context.WithTimeout(dctx, q.cfg.DispatchTimeout)
		prev := cancel
		cancel = func() { cancelTimeout(); prev() }
	}
	lc := &liveClaim{claim: c, renewedAt: q.cfg.Clock(), cancel: cancel}
	q.mu.Lock()
	q.live[lc] = struct{}{}
	q.mu.Unlock()
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		defer stopAbort()
		defer cancel()
		pkg := ExecutionPackage{ExecutionID: c.Item.ExecutionID, FlowID: c.Item.FlowID, Input: c.Item.Input,
			Principal: q.principal(c.Item.Tenant)}
		res, err := q.cfg.Dispatcher.Dispatch(dctx, pkg)
		q.settle(context.WithoutCancel(ctx), lc, res, err, dctx.Err() != nil)
	}()
}

// settle ends a claim by its dispatch's outcome; aborted reports that the
// Queue's own ctx (Close, DispatchTimeout, a lost claim) ended the
// dispatch.
func (q *Queue) settle(ctx context.Context, lc *liveClaim, res ExecutionResult, err error, aborted bool) {
	q.mu.Lock()
	c, lost := lc.claim, lc.lost
	q.mu.Unlock()
	id := c.Item.ExecutionID
	var settleErr error
	switch {
	case lost:
		q.finish(lc, false)
		q.released(c, store.ErrClaimLost)
		return
	case err == nil:
	case !aborted && permanentRefusal(err):
		settleErr = err
	case !aborted && c.Attempt >= q.cfg.MaxAttempts:
		settleErr = &AttemptsExhaustedError{ExecutionID: id, Attempts: c.Attempt, Err: err}
	default:
		rerr := q.cfg.Store.Release(ctx, c)
		q.finish(lc, false)
		if rerr != nil {
			q.cfg.Logger.WarnContext(ctx, "dispatch: releasing a queue claim failed; it returns at expiry",
				"queue", q.cfg.Name, "executionId", id, "err", rerr)
		}
		q.released(c, err)
		return
	}
	if cerr := q.cfg.Store.Complete(ctx, c); cerr != nil {
		q.finish(lc, false)
		q.cfg.Logger.WarnContext(ctx, "dispatch: completing a queue claim failed; the start will be dispatched again",
			"queue", q.cfg.Name, "executionId", id, "err", cerr)
		q.released(c, cerr)
		return
	}
	q.finish(lc, true)
	if settleErr != nil {
		q.cfg.Logger.InfoContext(ctx, "dispatch: queued start refused for good", "queue", q.cfg.Name, "executionId", id, "err", settleErr)
		res = ExecutionResult{}
	}
	if q.cfg.OnSettled != nil {
		q.cfg.OnSettled(c, res, settleErr)
	}
}

// finish frees the claim's slot; a completed claim (settled) wakes Run to
// claim again at once, a released one waits for the next Poll, so a
// failing worker is not hammered through a tight claim-release loop.
func (q *Queue) finish(lc *liveClaim, settled bool) {
	q.mu.Lock()
	delete(q.live, lc)
	q.mu.Unlock()
	if !settled {
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Queue) released(c store.Claim, why error) {
	if q.cfg.OnReleased != nil {
		q.cfg.OnReleased(c, why)
	}
}

// renewDue renews every live claim last renewed ClaimTTL/3 or longer ago
// on Clock. A claim lost to another owner cancels its dispatch: the item
// is someone else's now, and its start is idempotent.
func (q *Queue) renewDue(ctx context.Context) {
	now := q.cfg.Clock()
	every := q.cfg.ClaimTTL / 3
	q.mu.Lock()
	var due []*liveClaim
	for lc := range q.live { //loom:order-independent each claim is renewed on its own
		if !lc.lost && now.Sub(lc.renewedAt) >= every {
			due = append(due, lc)
		}
	}
	q.mu.Unlock()
	for _, lc := range due {
		q.mu.Lock()
		c := lc.claim
		q.mu.Unlock()
		renewed, err := q.cfg.Store.Renew(ctx, c, now.UnixMilli(), q.cfg.ClaimTTL.Milliseconds())
		q.mu.Lock()
		switch {
		case err == nil:
			lc.claim, lc.renewedAt = renewed, now
		case errors.Is(err, store.ErrClaimLost):
			lc.lost = true
			lc.cancel()
		}
		q.mu.Unlock()
		if err != nil && !errors.Is(err, store.ErrClaimLost) {
			q.cfg.Logger.WarnContext(ctx, "dispatch: renewing a queue claim failed; retrying at the next round",
				"queue", q.cfg.Name, "executionId", c.Item.ExecutionID, "err", err)
		}
	}
}

// permanentRefusal reports whether a start's dispatch error refuses the
// start itself, so claiming it again would be refused again: a duplicate
// (loom.ErrExecutionExists), an invalid package or id, an unknown flow, a
// disabled feature, a denial. Through workerhttp a RemoteError unwraps to
// the same errors. Everything else — a transport failure, a 5xx, an open
// circuit, exhausted restarts, no healthy worker, a closed runtime — says
// nothing about the item, and the claim is released.
func permanentRefusal(err error) bool {
	var denied *loom.ExecutionDeniedError
	switch {
	case errors.As(err, &denied),
		errors.Is(err, loom.ErrExecutionExists),
		errors.Is(err, ErrInvalidPackage),
		errors.Is(err, event.ErrInvalidEnvelope),
		errors.Is(err, loom.ErrUnknownFlow),
		errors.Is(err, loom.ErrFeatureDisabled):
		return true
	}
	return false
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return hex.EncodeToString(b)
}
