package loopback

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// DefaultAddr is where Listen binds when given no address: loopback, on a
// port the system picks.
const DefaultAddr = "127.0.0.1:0"

// Refusal is how a package words Listen's refusal of a host beyond
// loopback: the sentinel its callers match, and the prefix and advice of
// the message.
type Refusal struct {
	// Sentinel is what errors.Is matches the refusal with, such as
	// wire.ErrNotLoopback.
	Sentinel error
	// Prefix starts the message's second line, the package name ("wire").
	Prefix string
	// Advice ends the message: how to allow a remote address explicitly.
	Advice string
}

// NotLoopbackError is Listen's refusal of a host that is neither a
// loopback IP nor "localhost", without allowRemote. It matches its
// Refusal.Sentinel with errors.Is. Its message is the sentinel's, then a
// line naming the host and the way out.
type NotLoopbackError struct {
	Host string
	Refusal
}

func (e *NotLoopbackError) Error() string {
	return e.Sentinel.Error() + "\n" + e.Prefix + ": " + e.Host +
		" is not a loopback address: bind 127.0.0.1, or " + e.Advice
}

// Unwrap returns the sentinel, for errors.Is.
func (e *NotLoopbackError) Unwrap() error { return e.Sentinel }

// Listen opens a TCP listener on loopback unless allowRemote: an empty
// address is DefaultAddr, an address without a host (":8080") binds
// 127.0.0.1 — not every interface, as net.Listen would — and a host that is
// not a loopback IP or "localhost" is refused with a *NotLoopbackError
// worded by r, before any socket is opened. A malformed address returns
// net.SplitHostPort's error.
func Listen(addr string, allowRemote bool, r Refusal) (net.Listener, error) {
	if addr == "" {
		addr = DefaultAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !allowRemote && !IsHost(host) {
		return nil, &NotLoopbackError{Host: host, Refusal: r}
	}
	return net.Listen("tcp", net.JoinHostPort(host, port))
}

// IsHost reports whether host is "localhost" or a loopback IP; a name
// other than localhost is not resolved, and counts as remote.
func IsHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsAddr reports whether a is a TCP address on a loopback IP.
func IsAddr(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// Serve serves h on ln until ctx ends, then shuts down: it stops
// accepting, lets in-flight requests finish for up to grace, and closes ln
// (forcibly, with the open connections, past it). It returns nil after a
// shutdown requested through ctx, or the error that stopped serving. The
// server bounds headers (10 s to read them, 64 KiB) and idle connections
// (2 min); configure, when given, adjusts it before it serves (a base
// context, a shutdown hook).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, configure ...func(*http.Server)) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	for _, c := range configure {
		c(srv)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		err = errors.Join(err, srv.Close())
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
