package loopback

import (
	"net"
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
