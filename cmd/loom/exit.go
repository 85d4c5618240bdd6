package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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

// exitError carries an exit status and a message that says what to do, and
// optionally structured detail for --json.
type exitError struct {
	code int
	msg  string
	data map[string]any
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

// jsonError is what a failed command prints on stdout with --json: the
// app's JSON-RPC error (its code, message and data) when the app refused,
// else the exit status as the code. Codes never collide: the app's are
// negative, exit statuses 1–6.
type jsonError struct {
	Code       int             `json:"code"`
	Message    string          `json:"message"`
	Data       json.RawMessage `json:"data,omitempty"`
	ExitStatus int             `json:"exitStatus"`
}

// exit prints err (prefixed with the command) and maps it to a status.
// An error cobra raised before a command ran is a usage error. With --json
// the error is also printed on stdout, as a jsonError.
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
	if c.json {
		je := jsonError{Code: code, Message: msg, ExitStatus: code}
		var (
			we *wire.Error
			ee *exitError
		)
		switch {
		case errors.As(err, &we):
			je.Code, je.Data = we.Code, we.Data
		case errors.As(err, &ee) && len(ee.data) > 0:
			je.Data, _ = json.Marshal(ee.data) // a map of strings and numbers: it encodes
		}
		_ = c.printJSON(je) // stdout gone: the exit status still says it
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
		return wireStatus(we), explainWire(we)
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
	case wire.CodeUnauthenticated, wire.CodeDenied, wire.CodePayloadInvalid, wire.CodeExecutionExists,
		wire.CodeFlowCodeMismatch, wire.CodeSendRefused:
		return exitRefused
	case wire.CodeInvalidParams, wire.CodeInvalidInput, wire.CodePayloadTooLarge, wire.CodeRequestTooLarge:
		return exitUsage
	case wire.CodeSubscribeUnsupported, wire.CodeMethodNotFound, wire.CodeNotConfigured:
		return exitUnsupported
	}
	if e.Code <= wire.CodeResumeRefused && e.Code >= wire.CodeBusy {
		return exitRefused
	}
	return exitFailure
}

// explainWire renders an app's refusal for people: its message, then the
// structured detail it carries, line by line.
func explainWire(e *wire.Error) string {
	d := e.Detail()
	var b strings.Builder
	switch e.Code {
	case wire.CodeBusy:
		b.WriteString("refused, nothing was recorded: ")
		if d.Owner != "" {
			fmt.Fprintf(&b, "execution %s is driven by node %s (which may have stopped: its lease lapses unless renewed)", d.ExecutionID, d.Owner)
		} else {
			fmt.Fprintf(&b, "execution %s moved recently, and the node that moved it has not taken its lease yet", d.ExecutionID)
		}
		if d.ExpiresAt > 0 {
			at := time.UnixMilli(d.ExpiresAt)
			fmt.Fprintf(&b, "; retry after %s (in %s)", stamp(d.ExpiresAt), max(time.Until(at), 0).Round(time.Second))
		} else {
			b.WriteString("; retry shortly")
		}
		return b.String()
	case wire.CodeMethodNotFound:
		return e.Message + " (the app speaks an older wire ABI: loom handshake shows its version)"
	}
	b.WriteString(e.Message)
	switch {
	case len(d.Violations) > 0:
		for _, v := range d.Violations {
			fmt.Fprintf(&b, "\n  at %s (%s): %s", v.Pointer, v.Keyword, v.Message)
		}
		if d.ExecutionID != "" {
			fmt.Fprintf(&b, "\n  loom gate %s shows the schema the answer must satisfy", d.ExecutionID)
		}
	case e.Code == wire.CodeFlowCodeMismatch:
		fmt.Fprintf(&b, "\n  recorded code:   %s\n  registered code: %s", d.Recorded, d.Registered)
	case e.Code == wire.CodeNotConfigured:
		fmt.Fprintf(&b, "\n  the app must set Config.%s (%s)", d.Field, d.Need)
	case e.Code == wire.CodePayloadInvalid && d.Reason == "in-doubt" && d.ExecutionID != "":
		fmt.Fprintf(&b, "\n  loom gate %s shows the step and attempt in doubt", d.ExecutionID)
	}
	return b.String()
}

// explain turns a store-side error about one execution into what to do.
func (c *cli) explain(s *openedStore, id string, err error) error {
	var se *inspect.SequenceError
	switch {
	case errors.Is(err, loom.ErrExecutionNotFound):
		return &exitError{code: exitNotFound, msg: fmt.Sprintf("no execution %q in %s: list them with loom ls --store %s", id, s.name, s.name),
			data: map[string]any{"executionId": id}}
	case errors.As(err, &se):
		return &exitError{code: exitNotFound, msg: fmt.Sprintf("%s has no event #%d: its log ends at #%d (loom logs %s --store %s lists the sequences)",
			id, se.At, se.Last, id, s.name), data: map[string]any{"executionId": id, "at": se.At, "last": se.Last}}
	}
	return err
}
