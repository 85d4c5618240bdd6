package workerhttp

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

// ShutdownGrace bounds how long Serve waits for in-flight packages once its
// context ends; packages still running are then cut off (their callers see
// a retryable transport error, and the executions run on in the runtime).
const ShutdownGrace = 30 * time.Second

var (
	// ErrNotLoopback matches Listen's refusal of a non-loopback address
	// without AllowRemote.
	ErrNotLoopback = errors.New("workerhttp: refusing to listen beyond loopback")
	// ErrInsecureRemote matches Serve's refusal to serve a server built with
	// Options.Insecure on a non-loopback listener.
	ErrInsecureRemote = errors.New("workerhttp: refusing to serve an unauthenticated worker beyond loopback")
)

// ListenOption configures Listen.
type ListenOption func(*listenConfig)

type listenConfig struct{ remote bool }

// AllowRemote lets Listen bind a non-loopback address: the worker is then
// reachable from other machines, and only Options.Authenticate stands
// between them and every execution of its flows. Put TLS in front of it.
func AllowRemote() ListenOption { return func(c *listenConfig) { c.remote = true } }

// Listen opens a TCP listener for a worker server, on loopback unless told
// otherwise: an empty address is DefaultAddr, an address without a host
// (":8080") binds 127.0.0.1 — not every interface, as net.Listen would —
// and a host that is not a loopback IP or "localhost" is refused with an
// error matching ErrNotLoopback unless AllowRemote is given.
func Listen(addr string, opts ...ListenOption) (net.Listener, error) {
	var c listenConfig
	for _, o := range opts {
		o(&c)
	}
	return loopback.Listen(addr, c.remote, loopback.Refusal{
		Sentinel: ErrNotLoopback, Prefix: "workerhttp", Advice: "allow remote callers explicitly with AllowRemote"})
}

// Serve serves s on ln until ctx ends, then shuts down: it stops accepting,
// lets in-flight packages finish for up to ShutdownGrace, and closes ln. It
// returns nil after a shutdown requested through ctx, or the error that
// stopped serving. A server built with Options.Insecure (and no
// Authenticate) is refused on a listener whose address is not a loopback
// TCP address (ErrInsecureRemote), and ln is closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.opts.Insecure && s.opts.Authenticate == nil && !loopback.IsAddr(ln.Addr()) {
		return errors.Join(ErrInsecureRemote, ln.Close())
	}
	return loopback.Serve(ctx, ln, s, ShutdownGrace)
}
