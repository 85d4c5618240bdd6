package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/wire"
)

// The exit statuses (see the package comment).
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitCheckFailed = 3
	exitNotFound    = 4
	exitRefused     = 5
	exitUnsupported = 6
)

// exitError carries an exit status and a message that says what to do.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

func notFoundf(format string, args ...any) error {
	return &exitError{code: exitNotFound, msg: fmt.Sprintf(format, args...)}
}

func checkFailedf(format string, args ...any) error {
	return &exitError{code: exitCheckFailed, msg: fmt.Sprintf(format, args...)}
}

func unsupportedf(format string, args ...any) error {
	return &exitError{code: exitUnsupported, msg: fmt.Sprintf(format, args...)}
}

// exit prints err (prefixed with the command) and maps it to a status.
// An error cobra raised before a command ran is a usage error.
func (c *cli) exit(err error) int {
	if err == nil {
		return exitOK
	}
	code, msg := classify(err)
	if !c.ran && code == exitFailure {
		code = exitUsage
	}
	name := "loom"
	if c.command != "" {
		name += " " + c.command
	}
	fmt.Fprintf(c.stderr, "%s: %s\n", name, msg)
	if code == exitUsage {
		fmt.Fprintf(c.stderr, "Run '%s --help' for usage.\n", name)
	}
	return code
}

// classify maps an error to its exit status and message.
func classify(err error) (int, string) {
	var (
		ee *exitError
		we *wire.Error
		se *inspect.SequenceError
	)
	switch {
	case errors.As(err, &ee):
		return ee.code, ee.msg
	case errors.As(err, &we) && we.Code == wire.CodeUnauthenticated:
		return exitRefused, "the app refused the token: pass its token with --token, or set LOOM_TOKEN"
	case errors.As(err, &we):
		return wireStatus(we), we.Message
	case errors.As(err, &se):
		return exitNotFound, fmt.Sprintf("%s has no event #%d: its log ends at #%d", se.ExecutionID, se.At, se.Last)
	case errors.Is(err, loom.ErrExecutionNotFound):
		return exitNotFound, err.Error()
	}
	return exitFailure, strings.TrimPrefix(err.Error(), "loom: ")
}

// wireStatus maps a wire error code to an exit status.
func wireStatus(e *wire.Error) int {
	switch e.Code {
	case wire.CodeExecutionNotFound, wire.CodeUnknownFlow, wire.CodeSequenceOutOfRange:
		return exitNotFound
	case wire.CodeUnauthenticated, wire.CodeDenied, wire.CodePayloadInvalid, wire.CodeExecutionExists:
		return exitRefused
	case wire.CodeInvalidParams, wire.CodeInvalidInput, wire.CodePayloadTooLarge, wire.CodeRequestTooLarge:
		return exitUsage
	case wire.CodeSubscribeUnsupported, wire.CodeMethodNotFound:
		return exitUnsupported
	}
	if e.Code <= wire.CodeResumeRefused && e.Code >= wire.CodeBusy {
		return exitRefused
	}
	return exitFailure
}

// explain turns a store-side error about one execution into what to do.
func (c *cli) explain(s *openedStore, id string, err error) error {
	var se *inspect.SequenceError
	switch {
	case errors.Is(err, loom.ErrExecutionNotFound):
		return notFoundf("no execution %q in %s: list them with loom ls --store %s", id, s.name, s.name)
	case errors.As(err, &se):
		return notFoundf("%s has no event #%d: its log ends at #%d (loom logs %s --store %s lists the sequences)",
			id, se.At, se.Last, id, s.name)
	}
	return err
}
