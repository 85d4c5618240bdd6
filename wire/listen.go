package wire

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/loom-kernel/loom/internal/loopback"
)

// DefaultAddr is where Listen binds when given no address: loopback, on a
// port the system picks.
const DefaultAddr = loopback.DefaultAddr

// ErrNotLoopback matches Listen's refusal of a non-loopback address without
// AllowRemote.
var ErrNotLoopback = errors.New("wire: refusing to listen beyond loopback")

// ListenOption configures Listen.
type ListenOption func(*listenConfig)

type listenConfig struct{ remote bool }

// AllowRemote lets Listen bind a non-loopback address: the wire ABI is then
// reachable from other machines, and only Options.Authenticate stands
// between them and every execution. Put TLS in front of it.
func AllowRemote() ListenOption { return func(c *listenConfig) { c.remote = true } }

// Listen opens a TCP listener for the wire ABI (or the inspector), on
// loopback unless told otherwise: an empty address is DefaultAddr, an
// address without a host (":7070") binds 127.0.0.1, and a host that is not a
// loopback IP or "localhost" is refused with an error matching
// ErrNotLoopback unless AllowRemote is given.
func Listen(addr string, opts ...ListenOption) (net.Listener, error) {
	var c listenConfig
	for _, o := range opts {
		o(&c)
	}
	return loopback.Listen(addr, c.remote, loopback.Refusal{
		Sentinel: ErrNotLoopback, Prefix: "wire", Advice: "allow remote callers explicitly"})
}

// ShutdownGrace bounds how long Serve waits for in-flight calls once its
// context ends.
const ShutdownGrace = 10 * time.Second

// Serve serves h on ln until ctx ends, then shuts down: it stops accepting,
// ends every open event stream with an "error" event (CodeUnavailable, so
// clients reconnect elsewhere with Last-Event-ID), lets in-flight calls
// finish for up to ShutdownGrace, and closes ln. It returns nil after a
// shutdown requested through ctx, or the error that stopped serving.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	stop := make(chan struct{})
	var once sync.Once
	return loopback.Serve(ctx, ln, h, ShutdownGrace, func(srv *http.Server) {
		srv.BaseContext = func(net.Listener) context.Context {
			return context.WithValue(context.Background(), stopKey{}, stop)
		}
		srv.RegisterOnShutdown(func() { once.Do(func() { close(stop) }) })
	})
}
