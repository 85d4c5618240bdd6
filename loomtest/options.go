package loomtest

import (
	"time"

	"github.com/loom-kernel/loom"
)

// Option configures New.
type Option func(*options)

// options are New's settings. defaultOptions lists every default.
type options struct {
	flows       []*loom.Flow
	sqlite      bool
	clock       *Clock
	mocks       []*Mock
	config      []func(*loom.Config)
	waitTimeout time.Duration
	goldenDir   string
}

// defaultOptions: no flows; memory stores (store/memstore); a new Clock at
// Epoch; no mocks; waits bounded by DefaultWaitTimeout (or the test's
// deadline, if sooner); golden files under "testdata".
func defaultOptions() options {
	return options{waitTimeout: DefaultWaitTimeout, goldenDir: "testdata"}
}

// DefaultWaitTimeout bounds every wait of an Env (WaitForGate and the
// others, time skipping, Restart): a bound on a hang, never a measurement.
const DefaultWaitTimeout = 10 * time.Second

// WithFlows registers flows in the Env's runtime, and in every runtime
// Restart opens.
func WithFlows(flows ...*loom.Flow) Option {
	return func(o *options) { o.flows = append(o.flows, flows...) }
}

// WithSQLite stores everything in a SQLite file in t.TempDir()
// (plugins/sqlite) instead of memory: the same kernel over the embedded
// production store, removed when the test ends.
func WithSQLite() Option { return func(o *options) { o.sqlite = true } }

// WithClock injects c as the runtime's clock (default: a new Clock at
// Epoch). Env.Clock returns it either way.
func WithClock(c *Clock) Option { return func(o *options) { o.clock = c } }

// WithMocks replaces the effects of the mocks' tool ids (see NewMock).
// Two mocks of one tool id, or a mock already used by another Env, fail
// New.
func WithMocks(mocks ...*Mock) Option {
	return func(o *options) { o.mocks = append(o.mocks, mocks...) }
}

// WithConfig edits the loom.Config the Env builds, after its own settings
// and before the mocks are wired: a Durability, Features, Middleware, a
// ResumeAuthenticator… Every runtime Restart opens gets the same edits.
// The stores, the clock and the mocks are the Env's: a config that
// replaces them tests something else than the Env reports on.
func WithConfig(edit func(*loom.Config)) Option {
	return func(o *options) { o.config = append(o.config, edit) }
}

// WithWaitTimeout replaces DefaultWaitTimeout.
func WithWaitTimeout(d time.Duration) Option { return func(o *options) { o.waitTimeout = d } }

// WithGoldenDir keeps Golden's files in dir instead of "testdata".
func WithGoldenDir(dir string) Option { return func(o *options) { o.goldenDir = dir } }
