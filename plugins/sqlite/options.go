package sqlite

import (
	"strconv"
	"time"

	"github.com/loom-kernel/loom/event"
)

// Synchronous is the SQLite synchronous level of the writer connection: how
// hard a commit waits for the disk. The zero value is SyncFull.
type Synchronous int

const (
	// SyncFull (the default) fsyncs the write-ahead log on every commit: an
	// acknowledged append survives a power loss or an OS crash.
	SyncFull Synchronous = iota
	// SyncNormal fsyncs only at checkpoints: an acknowledged append survives
	// a crash of the process but may be lost, with the transactions after
	// it, on a power loss or an OS crash. The file is never corrupted.
	SyncNormal
	// SyncExtra is SyncFull that also syncs the directory after the log is
	// reset, for file systems where FULL is not enough.
	SyncExtra
)

// String returns the pragma value ("FULL", "NORMAL", "EXTRA"), or
// "Synchronous(n)" for a value outside the constants.
func (s Synchronous) String() string {
	switch s {
	case SyncFull:
		return "FULL"
	case SyncNormal:
		return "NORMAL"
	case SyncExtra:
		return "EXTRA"
	}
	return "Synchronous(" + strconv.Itoa(int(s)) + ")"
}

func (s Synchronous) valid() bool { return s >= SyncFull && s <= SyncExtra }

// Limits of the group-commit writer. Each is a bound on memory or latency,
// not a tuning knob: a group is cut at whichever is reached first.
const (
	// MaxGroupBatches caps how many Append calls one transaction commits.
	MaxGroupBatches = 256
	// MaxGroupBytes caps the payload and metadata bytes of one group; a
	// single batch larger than this is committed alone.
	MaxGroupBytes = 8 << 20
	// MaxQueuedBatches caps the Append calls waiting for a commit; a caller
	// beyond it drains the queue itself, or waits (or gives up with its
	// context) while another caller does.
	MaxQueuedBatches = 1024
)

// Option configures Open.
type Option func(*options)

// options holds the configuration of a DB. defaultOptions lists every default.
type options struct {
	synchronous Synchronous
	limits      event.Limits
	busyTimeout time.Duration
	readConns   int
	migrations  []migration // tests replace the list; nil means schemaMigrations
}

// defaultOptions: synchronous=FULL, payload cap event.DefaultMaxPayloadBytes
// (16 MiB, via the zero event.Limits), busy_timeout 5 s, 4 read connections.
func defaultOptions() options {
	return options{
		synchronous: SyncFull,
		busyTimeout: 5 * time.Second,
		readConns:   4,
	}
}

// WithSynchronous sets the synchronous level of the writer connection
// (default SyncFull). Open refuses a value outside the constants.
func WithSynchronous(s Synchronous) Option { return func(o *options) { o.synchronous = s } }

// WithLimits sets the payload cap every Append enforces (default 16 MiB).
func WithLimits(l event.Limits) Option { return func(o *options) { o.limits = l } }

// WithBusyTimeout sets how long a connection waits for a lock held by
// another process before failing with SQLITE_BUSY (default 5 s). Inside one
// process appends never wait for it: the DB has one write connection.
func WithBusyTimeout(d time.Duration) Option { return func(o *options) { o.busyTimeout = d } }

// WithReadConns sets the size of the read connection pool (default 4). WAL
// lets readers run beside the writer; values below 1 are taken as 1.
func WithReadConns(n int) Option {
	return func(o *options) {
		if n < 1 {
			n = 1
		}
		o.readConns = n
	}
}

// withMigrations replaces the migration list (tests only).
func withMigrations(m []migration) Option { return func(o *options) { o.migrations = m } }
