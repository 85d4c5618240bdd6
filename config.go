package loom

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"time"

	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store"
)

// Config is the composition root: the stores, the flows and the hooks a
// Runtime is built from. An event store is required (Storage or Events);
// every other field is optional, and the zero value of each is its
// documented default. New refuses a Config whose fields contradict each
// other, naming the field to change.
type Config struct {
	// Storage wires every store a storage preset provides in one field:
	// loom.Config{Storage: st} with st from plugins/sqlite.Storage,
	// plugins/postgres.Storage or memstore.NewSet. It fills Events,
	// Snapshots, Branches, Timers, Leases and Archive; a field also set by
	// hand must be the same store (New refuses two).
	Storage store.Provider
	// Events is the durable log. Required, here or through Storage.
	Events store.EventStore
	// Snapshots, when set, checkpoints state at every suspend, at every fork
	// and every SnapshotEvery events, so a resume folds only the tail.
	Snapshots store.SnapshotStore
	// Branches, when set, backs Promote.
	Branches store.BranchRegistry
	// Timers, when set, makes every timed wait durable: a poller fires it
	// through the resume path, across restarts. Without it a timed wait
	// (Sleep, a gate Timeout, a Select timer, WithDeadline) is refused at the
	// call with *NotConfiguredError.
	Timers store.TimerStore
	// Archive, when set, keeps the events Compact moves out of the logs
	// (store.ArchiveStore; a storage preset provides one). Replay, resume
	// and reads never look at it; ReadArchived does.
	Archive store.ArchiveStore
	// TimerPoll is how often the background poller looks for due timers
	// (default 1s; negative: no background poller, call FireDueTimers).
	TimerPoll time.Duration
	// TimerWorkers bounds the timers fired concurrently (default 32).
	TimerWorkers int
	// Features turns on optional syscalls (the durable inbox, continue-as-
	// new, recorded Parallel scopes); each is off by default and, off,
	// changes nothing.
	Features Features
	// Effects registers effects by tool id: a Task without Invoke runs the
	// effect of its ToolID.
	Effects *effect.Registry
	// Middleware wraps every effect, the first outermost (retry, metering,
	// safety, redaction, claim-check…). None by default: then the log is
	// byte-identical to a kernel without the ring.
	Middleware []effect.Middleware
	// EffectAuthorizer, when set, authorizes every effect before it runs,
	// as the principal the execution was started under: a denial is recorded as EFFECT_DENIED and fails the step with
	// *effect.CapabilityDeniedError, the effect never running.
	EffectAuthorizer effect.Authorizer
	// MaxEffectTime bounds every effect attempt (default: unbounded).
	MaxEffectTime time.Duration
	// DefaultRetry, when set, is the retry policy of every step that sets
	// none of its own (WithRetry). Default: none, a failed attempt is the
	// step's outcome.
	DefaultRetry *middleware.RetryPolicy
	// Leases, when set, gives each execution one live driver across nodes
	// with heartbeat leases (see leases.go): a live lease vetoes another
	// node's re-drive, an expired one lets any node's recovery (automatic,
	// or Runtime.Recover) take the execution over.
	Leases store.LeaseStore
	// NodeID names this process as a lease owner (default: a random id).
	NodeID string
	// LeaseTTL is how long a lease lives without a heartbeat (default 30s).
	LeaseTTL time.Duration
	// Heartbeat is how often leases are renewed (default LeaseTTL/3;
	// negative: no background heartbeat, call RenewLeases).
	Heartbeat time.Duration
	// Recovery tunes the automatic recovery of crashed executions: by
	// default the runtime re-drives what a stopped process left running,
	// at start and every Recovery.Interval, without the app calling
	// anything.
	Recovery Recovery
	// DisableFencing turns off fencing even when the event store offers it
	// (store.Fencer). With fencing, a driver that another process took the
	// execution over from (a re-drive, a resume) has its appends refused
	// with *store.FencedError, nothing written.
	DisableFencing bool
	// Flows are the flows this runtime can run, by id (each once); every
	// process that may resume or recover an execution registers its flow.
	Flows []*Flow
	// SnapshotEvery is N in "a snapshot every N events" (default 1000 when
	// Snapshots is set; negative disables the periodic ones).
	SnapshotEvery int
	// Durability chooses when step outcomes become durable (default
	// WriteBehind).
	Durability Durability
	// StickyParks bounds how many flows parked at a gate stay blocked in
	// memory, so a Resume in this process answers them in place instead of
	// replaying (default 256; negative disables).
	StickyParks int
	// Divergence chooses what a replay that issues other step ids than its
	// log does (default DivergenceFail: park on __loom_diverged__).
	Divergence DivergenceMode
	// ResumeAuthenticator, when set, verifies who resumes; its verdict is
	// recorded as APPROVAL_GRANTED, and the effect ring sees it as the
	// approver of the steps after the gate.
	ResumeAuthenticator ResumeAuthenticator
	// Authorizer, when set, gates start, resume, cancel, query and send
	// (EXECUTION_DENIED).
	Authorizer ExecutionAuthorizer
	// Clock stamps envelopes and answers loom.Now (default the system clock).
	Clock Clock
	// NewID mints execution and event ids (default 128 random bits, hex).
	NewID func() string
	// OnEvent, when set, is called with every event a journal of this
	// runtime commits, synchronously at the commit and in commit order per
	// execution — before the event is durable, so it may report an event a
	// crash then loses (use OnDurableEvent for what the log holds). It runs
	// on the committing flow's goroutine: a slow hook slows that flow, never
	// the durable tail or another execution. It must not call back into the
	// runtime for the same execution. A panic is recovered and logged.
	OnEvent func(event.Envelope)
	// OnDurableEvent, when set, is called with every event once the log
	// holds it (ADR 0147): never for an event the log does not hold, at
	// most once, in order per execution. It runs on a goroutine of its own,
	// fed by a queue of EventHookBuffer events: a hook that blocks or falls
	// behind never stalls a journal; past the bound, events are dropped,
	// logged and counted (Runtime.DroppedDurableEvents). A panic is
	// recovered and logged. Close delivers what is queued before it
	// returns.
	OnDurableEvent func(event.Envelope)
	// EventHookBuffer bounds OnDurableEvent's queue (default 65536 events).
	EventHookBuffer int
	// Observer, when set, sees drives, step attempts, operations, append
	// batches, timer firings and lease take-overs (the telemetry package
	// wires OpenTelemetry through it). Nil by default: none of it runs.
	Observer Observer
	// Interleaver, for simulation testing, runs the branches of each
	// drive's Parallel blocks one at a time and chooses at every syscall
	// which goes on (package dst sets it from its seed). Nil by default:
	// branches are goroutines the Go scheduler interleaves.
	Interleaver Interleaver
	// Logger receives divergence warnings, recovery notes and every
	// best-effort failure the runtime rides out (default slog.Default()).
	Logger *slog.Logger
}

// Recovery configures automatic recovery (see Runtime.Recover). Recovery
// is the kernel's own act: it never goes through the ResumeAuthenticator
// or the Authorizer, and records EXECUTION_RECOVERED.
type Recovery struct {
	// Disabled turns automatic recovery off; call Runtime.Recover yourself.
	Disabled bool
	// Interval is the time between passes (default LeaseTTL). A pass skips
	// an execution another node's live lease holds; without Config.Leases
	// it skips one whose log moved within the last LeaseTTL, since nothing
	// else says whether another process still drives it.
	Interval time.Duration
	// ParkedEvery makes every ParkedEvery-th automatic pass (the first
	// one included) also look at parked executions, when Features.Inbox or
	// Features.Children is on: a message or a child's end whose wake-up a
	// crashed process never delivered is answered then, without waiting
	// for a restart or a Runtime.Recover. The other passes act on running
	// executions only, so many parked executions cost them nothing
	// (default 10; negative: the first pass only).
	ParkedEvery int
}

// Features are the kernel.features flags (spec §2, ADRs 0109, 0110, 0112).
// Each is off by default, and off, the kernel's behaviour and logs are
// byte-identical to a kernel without it.
type Features struct {
	// Inbox enables Runtime.Send and the receive and select syscalls.
	Inbox bool
	// ContinueAsNew enables the continueAsNew syscall.
	ContinueAsNew bool
	// Scopes records each Parallel block's outcome as a kernel-stamped
	// PARALLEL_COMPLETED (structured concurrency, ADR 0112).
	Scopes bool
	// Children enables SpawnChild and the child awaits (AwaitChild,
	// AwaitChildren, AwaitAll); recovery then also answers parents whose
	// child ended while no process listened.
	Children bool
}

// Durability says when a step's outcome is durable.
type Durability int

const (
	// WriteBehind appends step events on an ordered asynchronous tail; they
	// are durable by the next barrier (a suspend, a non-idempotent step's
	// start, completion or failure). A crash may lose completed steps, which
	// then run again on recovery.
	WriteBehind Durability = iota
	// StepDurable makes every step completion durable before the flow goes
	// on: a completed step never runs twice.
	StepDurable
)

// DivergenceMode says what happens when a re-run calls other steps (or
// gates) than its log recorded — a renamed or reordered step: park on
// __loom_diverged__ before it runs (the default), warn and go on, or not
// check (ADR 0113).
type DivergenceMode int

const (
	// DivergenceFail (the default) parks the execution on the reserved
	// __loom_diverged__ gate before the diverging step runs, so a renamed or
	// reordered step never runs its side effect again unnoticed; the log
	// shows the park and its reason. An operator answers it with a null
	// resume of that gate once the code is fixed, or moves the execution
	// with ResumeAs.
	DivergenceFail DivergenceMode = iota
	// DivergenceWarn logs a divergence and goes on.
	DivergenceWarn
	// DivergenceOff disables the detector.
	DivergenceOff
)

// Clock is the injected time source.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// ResumeAuthenticator verifies the identity behind a resume before anything
// is appended. A nil error admits the resume and principal is recorded as
// APPROVAL_GRANTED; an error refuses it with nothing appended.
type ResumeAuthenticator interface {
	Authenticate(ctx context.Context, executionID string, ev ResumeEvent) (principal json.RawMessage, err error)
}

// ExecutionAuthorizer gates execution lifecycle actions at the trust
// boundary. A non-nil error denies: the action does not happen and, for an
// existing execution, EXECUTION_DENIED is recorded.
type ExecutionAuthorizer interface {
	Authorize(ctx context.Context, req AuthzRequest) error
}

// AuthzRequest describes an action to authorize.
type AuthzRequest struct {
	Action      string // "start", "resume", "cancel", "query", "send", "compact", "delete", "shred", "list" (a denied "list" only leaves the execution out, recording nothing)
	ExecutionID string
	FlowID      string
	// Tenant is the execution's recorded tenant (for a start, the
	// starting principal's); "" for none.
	Tenant    string
	Principal any // from WithPrincipal on the caller's context
}

type principalKey struct{}

// WithPrincipal attaches the caller's identity to ctx for the Authorizer.
func WithPrincipal(ctx context.Context, p any) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

func principalOf(ctx context.Context) any { return ctx.Value(principalKey{}) }

func randomID() string {
	var b [16]byte
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		panic("loom: no randomness for ids: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// wireStorage fills the store fields from Storage, refusing a field set by
// hand to another store than the preset's.
func (c *Config) wireStorage() error {
	if c.Storage == nil {
		return nil
	}
	s := c.Storage.StoreSet()
	pick := func(name string, set, preset any) error {
		if set != nil && preset != nil && set != preset {
			return &ConfigError{Field: name, Problem: "is set to another store than Storage's; set one or the other"}
		}
		return nil
	}
	for _, f := range []struct {
		name        string
		set, preset any
	}{{"Events", c.Events, s.Events}, {"Snapshots", c.Snapshots, s.Snapshots}, {"Branches", c.Branches, s.Branches},
		{"Timers", c.Timers, s.Timers}, {"Leases", c.Leases, s.Leases}, {"Archive", c.Archive, s.Archive}} {
		if err := pick(f.name, nilIfNil(f.set), nilIfNil(f.preset)); err != nil {
			return err
		}
	}
	if c.Events == nil {
		c.Events = s.Events
	}
	if c.Snapshots == nil {
		c.Snapshots = s.Snapshots
	}
	if c.Branches == nil {
		c.Branches = s.Branches
	}
	if c.Timers == nil {
		c.Timers = s.Timers
	}
	if c.Leases == nil {
		c.Leases = s.Leases
	}
	if c.Archive == nil {
		c.Archive = s.Archive
	}
	return nil
}

// nilIfNil turns an interface holding a nil pointer into nil.
func nilIfNil(v any) any {
	if v == nil {
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil
	}
	return v
}

// validate refuses fields that contradict each other, before defaults.
func (c *Config) validate() error {
	refuse := func(field, problem string) error { return &ConfigError{Field: field, Problem: problem} }
	switch {
	case c.Events == nil:
		return refuse("Events", "is required: set Storage (e.g. plugins/sqlite.Storage) or Events")
	case c.SnapshotEvery > 0 && c.Snapshots == nil:
		return refuse("SnapshotEvery", "needs Config.Snapshots to write the snapshots to")
	case c.TimerPoll > 0 && c.Timers == nil:
		return refuse("TimerPoll", "needs Config.Timers: there is nothing to poll")
	case c.Heartbeat > 0 && c.LeaseTTL > 0 && c.Heartbeat >= c.LeaseTTL:
		return refuse("Heartbeat", "must be shorter than LeaseTTL, or every lease lapses between two heartbeats")
	case c.Heartbeat > 0 && c.Leases == nil:
		return refuse("Heartbeat", "needs Config.Leases: there is no lease to renew")
	case c.Durability != WriteBehind && c.Durability != StepDurable:
		return refuse("Durability", "is not WriteBehind or StepDurable")
	case c.Divergence != DivergenceFail && c.Divergence != DivergenceWarn && c.Divergence != DivergenceOff:
		return refuse("Divergence", "is not DivergenceFail, DivergenceWarn or DivergenceOff")
	case c.MaxEffectTime < 0:
		return refuse("MaxEffectTime", "is negative")
	case c.EventHookBuffer < 0:
		return refuse("EventHookBuffer", "is negative")
	case c.EventHookBuffer > 0 && c.OnDurableEvent == nil:
		return refuse("EventHookBuffer", "needs Config.OnDurableEvent: there is no queue to bound")
	}
	return nil
}

func (c *Config) applyDefaults() {
	if c.Snapshots != nil && c.SnapshotEvery == 0 {
		c.SnapshotEvery = 1000
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.NewID == nil {
		c.NewID = randomID
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.TimerPoll == 0 {
		c.TimerPoll = time.Second
	}
	if c.EventHookBuffer == 0 {
		c.EventHookBuffer = 1 << 16
	}
	if c.TimerWorkers <= 0 {
		c.TimerWorkers = 32
	}
	if c.NodeID == "" {
		c.NodeID = "node-" + c.NewID()
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = c.LeaseTTL / 3
	}
	if c.Recovery.Interval <= 0 {
		c.Recovery.Interval = c.LeaseTTL
	}
	if c.Recovery.ParkedEvery == 0 {
		c.Recovery.ParkedEvery = 10
	}
}
