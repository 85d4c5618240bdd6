package postgres

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loom-kernel/loom/event"
)

// ErrInvalidOption is returned by Open and Storage for options they cannot
// honour: no DSN and no pool, both, a DSN that does not parse, a schema name
// PostgreSQL cannot hold, or a server whose settings break the durability
// contract (see Options.AllowAsynchronousCommit). Nothing stays open.
var ErrInvalidOption = errors.New("postgres: invalid option")

// DefaultSchema is the schema the stores use when Options.Schema is empty.
const DefaultSchema = "loom"

// maxIdentifierBytes is PostgreSQL's identifier limit (NAMEDATALEN - 1);
// a longer name would be truncated silently, so it is refused instead.
const maxIdentifierBytes = 63

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

// Options configures Open, Storage and the Open…Store functions. Exactly
// one of DSN and Pool must be set; every other zero field means the default
// listed on it.
type Options struct {
	// DSN is a libpq connection string or URL (pgxpool.ParseConfig syntax,
	// pool_max_conns included). The store opens a pool on it and closes the
	// pool on Close.
	DSN string
	// Pool is a pool the caller owns and lends: the store uses it and never
	// closes it (Close only stops the store's own goroutines and LISTEN
	// connection). The store opens its LISTEN connection with the pool's
	// connection config.
	Pool *pgxpool.Pool
	// Schema holds every table (default DefaultSchema). It is created if
	// missing, and quoted as an identifier, so any name of at most 63 bytes
	// of valid UTF-8 without NUL works, mixed case and spaces included.
	Schema string
	// Limits bounds envelopes on Append (default 16 MiB payloads).
	Limits event.Limits
	// ListenReconnectDelay is how long the LISTEN connection waits before
	// reconnecting after it was lost (default 250 ms). Every reconnect wakes
	// every subscriber to re-read its log, so nothing appended meanwhile is
	// missed.
	ListenReconnectDelay time.Duration
	// RereadInterval is the safety net under LISTEN/NOTIFY: every interval
	// each subscriber re-reads its log whether or not it was woken, which
	// bounds delivery latency when the LISTEN connection hangs without
	// failing (a network partition that TCP has not noticed yet). Default
	// 5 s; a negative value turns it off.
	RereadInterval time.Duration
	// AllowAsynchronousCommit lets Open accept a server whose
	// synchronous_commit is off. By default Open refuses it with
	// ErrInvalidOption: with it off, a commit returns before its WAL is
	// flushed, so an acknowledged append can be lost in a server crash.
	AllowAsynchronousCommit bool
	// Logger receives the failures nobody else hears of: a lost LISTEN
	// connection and failed reconnects (default slog.Default()).
	Logger *slog.Logger

	migrations []migration // tests replace the list; nil means schemaMigrations
}

// Defaults of Options.
const (
	defaultListenReconnectDelay = 250 * time.Millisecond
	defaultRereadInterval       = 5 * time.Second
)

// withDefaults checks o and fills in every default. It does not touch the
// network.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.DSN == "" && o.Pool == nil:
		return o, fmt.Errorf("%w: set DSN or Pool", ErrInvalidOption)
	case o.DSN != "" && o.Pool != nil:
		return o, fmt.Errorf("%w: set DSN or Pool, not both", ErrInvalidOption)
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if err := validateSchemaName(o.Schema); err != nil {
		return o, err
	}
	if o.ListenReconnectDelay <= 0 {
		o.ListenReconnectDelay = defaultListenReconnectDelay
	}
	if o.RereadInterval == 0 {
		o.RereadInterval = defaultRereadInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.migrations == nil {
		o.migrations = schemaMigrations
	}
	return o, nil
}

// validateSchemaName refuses a schema name PostgreSQL would reject or
// truncate: not UTF-8, holding NUL, or longer than 63 bytes.
func validateSchemaName(s string) error {
	switch {
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: schema name is not valid UTF-8", ErrInvalidOption)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: schema name holds NUL", ErrInvalidOption)
	case len(s) > maxIdentifierBytes:
		return fmt.Errorf("%w: schema name is longer than %d bytes", ErrInvalidOption, maxIdentifierBytes)
	}
	return nil
}

// pgText reports whether s can be sent as PostgreSQL text: valid UTF-8
// without NUL. Lookups of a key that is not (an id event.ValidateID would
// refuse) find nothing without a query, since no such key is ever stored.
func pgText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }
