package a2a

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/loom-kernel/loom/internal/loopback"
)

// DefaultAddr is where Listen binds when given no address: loopback, on a
// port the system picks.
const DefaultAddr = loopback.DefaultAddr

// ShutdownGrace bounds how long Serve waits for in-flight requests once
// its context ends; the executions behind them run on in the runtime.
const ShutdownGrace = 30 * time.Second

// ListenOption configures Listen.
type ListenOption func(*listenConfig)

type listenConfig struct{ remote bool }

// AllowRemote lets Listen bind a non-loopback address: the agents are then
// reachable from other machines, and only ServerOptions.Authenticate and
// Authorize stand between them and the published flows. Put TLS in front.
func AllowRemote() ListenOption { return func(c *listenConfig) { c.remote = true } }

// Listen opens a TCP listener for a Server, on loopback unless told
// otherwise: an empty address is DefaultAddr, an address without a host
// (":8080") binds 127.0.0.1 — not every interface — and a host that is not
// a loopback IP or "localhost" is refused, before any socket is opened,
// with an error matching ErrNotLoopback unless AllowRemote is given.
func Listen(addr string, opts ...ListenOption) (net.Listener, error) {
	var c listenConfig
	for _, o := range opts {
		o(&c)
	}
	return loopback.Listen(addr, c.remote, loopback.Refusal{
		Sentinel: ErrNotLoopback, Prefix: "a2a", Advice: "allow remote callers explicitly with AllowRemote"})
}

// Serve serves s.Handler() on ln until ctx ends, then shuts down: it stops
// accepting, lets in-flight requests finish for up to ShutdownGrace, and
// closes ln. It returns nil after a shutdown requested through ctx, or the
// error that stopped serving. An Insecure server without Authenticate is
// refused on a listener that is not a loopback TCP address
// (ErrInsecureRemote), and ln is closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.opts.Insecure && s.opts.Authenticate == nil && !loopback.IsAddr(ln.Addr()) {
		return errors.Join(ErrInsecureRemote, ln.Close())
	}
	return loopback.Serve(ctx, ln, s.Handler(), ShutdownGrace)
}
