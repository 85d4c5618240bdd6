package mcpserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/loom-kernel/loom/internal/loopback"
)

// shutdownGrace bounds how long Listen's shutdown waits for requests in
// flight once its context is done.
const shutdownGrace = 5 * time.Second

// Endpoint is a server Listen bound: its URL, and its end.
type Endpoint struct {
	// URL is the MCP endpoint, http://<bound address>/.
	URL  string
	done chan struct{}
	err  error
}

// Wait blocks until the endpoint shut down (its context done) and returns
// why serving ended early, nil after an orderly shutdown.
func (e *Endpoint) Wait() error {
	<-e.done
	return e.err
}

// Listen binds addr and serves Handler on it until ctx is done, then shuts
// down (requests in flight get shutdownGrace to finish). An empty addr
// binds 127.0.0.1 on a free port, an empty host 127.0.0.1; an address that
// is not loopback is refused with *NonLoopbackError, nothing bound, unless
// Options.AllowNonLoopback is set. The bound address is checked too, so a
// name that resolves beyond this host is refused after all.
func (s *Server) Listen(ctx context.Context, addr string) (*Endpoint, error) {
	addr, err := s.bindAddr(addr)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	bound := l.Addr().(*net.TCPAddr)
	if !s.opts.AllowNonLoopback && !loopback.IsAddr(bound) {
		err := &NonLoopbackError{Addr: bound.String()}
		if cerr := l.Close(); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		return nil, err
	}
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	e := &Endpoint{URL: "http://" + bound.String() + "/", done: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	go func() {
		defer close(e.done)
		select {
		case err := <-served:
			e.err = err // serving ended before shutdown was asked
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			defer cancel()
			e.err = hs.Shutdown(sctx)
			if err := <-served; !errors.Is(err, http.ErrServerClosed) && e.err == nil {
				e.err = err
			}
		}
	}()
	return e, nil
}

// bindAddr applies the loopback default and refusal to addr.
func (s *Server) bindAddr(addr string) (string, error) {
	if addr == "" {
		return loopback.DefaultAddr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	if !s.opts.AllowNonLoopback && !loopback.IsHost(host) {
		return "", &NonLoopbackError{Addr: addr}
	}
	return addr, nil
}
