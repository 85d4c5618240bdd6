package mcpserver

import (
	"errors"
	"strconv"
	"strings"
)

var (
	// ErrUnauthenticated is what the HTTP layer answers (401) when
	// Options.Authenticate refuses a request or names no caller. An
	// authenticator may return it (or wrap it); any error it returns is
	// treated the same, and its text is never sent to the client.
	ErrUnauthenticated = errors.New("mcpserver: unauthenticated")
	// ErrExecutionNotFound is the resume tool's answer for an execution id
	// with no log and for an execution another caller started: the two are
	// indistinguishable on purpose. Nothing is appended.
	ErrExecutionNotFound = errors.New("mcpserver: execution not found")
)

// InsecureConfigError is New's refusal of a server with no authentication
// or no authorization. Missing names the Options fields to set; setting
// Options.Insecure instead builds a server that lets every request in.
type InsecureConfigError struct {
	Missing []string
}

func (e *InsecureConfigError) Error() string {
	return "mcpserver: Options." + strings.Join(e.Missing, " and Options.") +
		" must be set (or set Options.Insecure to serve without them)"
}

// ToolConfigError is New's refusal of a tool declaration: an invalid or
// duplicate name, the reserved name "resume", an unknown flow or an input
// schema that is not a JSON object schema of type "object". Err, when set,
// is the underlying cause (loom.ErrUnknownFlow for an unknown flow).
type ToolConfigError struct {
	Tool    string
	Problem string
	Err     error
}

func (e *ToolConfigError) Error() string {
	s := "mcpserver: tool " + strconv.Quote(e.Tool) + ": " + e.Problem
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying cause.
func (e *ToolConfigError) Unwrap() error { return e.Err }

// ToolDeniedError is a tool call Options.Authorize refused: nothing was
// started or resumed. The host sees it as an isError tool result.
type ToolDeniedError struct {
	Tool   string
	Caller string
	Err    error
}

func (e *ToolDeniedError) Error() string {
	return "mcpserver: call of tool " + strconv.Quote(e.Tool) + " denied"
}

// Unwrap returns the authorizer's error.
func (e *ToolDeniedError) Unwrap() error { return e.Err }

// ArgumentsError is a tool call whose arguments could not be used: not a
// JSON object, or (for resume) missing executionId or gate. Nothing was
// started or resumed.
type ArgumentsError struct {
	Tool   string
	Detail string
}

func (e *ArgumentsError) Error() string {
	return "mcpserver: tool " + strconv.Quote(e.Tool) + ": invalid arguments: " + e.Detail
}

// NonLoopbackError is Listen's refusal of an address that is not a
// loopback one while Options.AllowNonLoopback is unset. Nothing was bound.
type NonLoopbackError struct {
	Addr string
}

func (e *NonLoopbackError) Error() string {
	return "mcpserver: address " + strconv.Quote(e.Addr) +
		" is not loopback (set Options.AllowNonLoopback to serve beyond this host)"
}
