package a2a

import (
	"errors"
	"fmt"
)

var (
	// ErrUnsecured matches NewServer's refusal to build a server without
	// both ServerOptions.Authenticate and ServerOptions.Authorize when
	// ServerOptions.Insecure is not set.
	ErrUnsecured = errors.New("a2a: a server needs Authenticate and Authorize (or Insecure)")
	// ErrUnknownPeer is the a2a.send effect's refusal of an input naming no
	// peer it was built with, or a peer other than the one its qualified
	// tool id names. Nothing is sent.
	ErrUnknownPeer = errors.New("a2a: unknown peer")
	// ErrInvalidSend is the a2a.send effect's refusal of an input that does
	// not decode or has no message. Nothing is sent.
	ErrInvalidSend = errors.New("a2a: invalid send input")
	// ErrNoReply is returned when a remote agent answers a send with
	// neither a task nor a message.
	ErrNoReply = errors.New("a2a: the remote agent sent no task and no message")
	// ErrNotLoopback matches Listen's refusal of a non-loopback address
	// without AllowRemote.
	ErrNotLoopback = errors.New("a2a: refusing to listen beyond loopback")
	// ErrInsecureRemote matches Serve's refusal to serve an Insecure server
	// on a non-loopback listener.
	ErrInsecureRemote = errors.New("a2a: refusing to serve an unauthenticated server beyond loopback")
)

// ConfigError is NewServer's or Discover's refusal of its options: Field
// names the option, Problem says what is wrong with it. Err, when set, is
// the sentinel it matches (ErrUnsecured).
type ConfigError struct {
	Field   string
	Problem string
	Err     error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("a2a: %s %s", e.Field, e.Problem)
}

// Unwrap returns the sentinel the refusal matches, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

// RemoteError is a failure the remote agent or the transport reported for
// a send: Agent names the peer, Op the protocol method, Err the SDK's error
// (match it with errors.Is against the a2a-go sentinels, such as
// a2a.ErrTaskNotFound or a2a.ErrUnauthenticated). It never holds the
// credential.
type RemoteError struct {
	Agent string
	Op    string
	Err   error
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("a2a: %s of agent %q: %v", e.Op, e.Agent, e.Err)
}

// Unwrap returns the SDK's error.
func (e *RemoteError) Unwrap() error { return e.Err }
