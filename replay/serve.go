package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

// The check protocol between `loom deploy check` and the app's check
// program (a binary whose main calls Main with the app's flows): loom
// opens the store read-only and writes one request per line on the
// program's stdin, the program answers one loom.ReplayReport per line on
// its stdout, in order. A first line {"hello": ProtocolVersion} from the
// program names its candidate flows, so loom can say what it checks
// against. The program never sees the store, so it can write nothing to
// it.

// ProtocolVersion is the version of the check protocol.
const ProtocolVersion = "1"

// Hello is the program's first line.
type Hello struct {
	Hello string   `json:"hello"` // ProtocolVersion
	Flows []string `json:"flows"`
}

// Request is one execution's log to check.
type Request struct {
	Events []json.RawMessage `json:"events"` // envelopes as event.Encode writes them
}

// MaxRequestBytes bounds one request line (one log): 256 MiB.
const MaxRequestBytes = 256 << 20

// ProtocolError is a request Serve cannot read: it names the line.
type ProtocolError struct {
	Line   int
	Reason string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("replay: request line %d: %s (each line must be {\"events\": [envelope, …]} as `loom deploy check` writes it)", e.Line, e.Reason)
}

// Serve answers the check protocol on r and w with the candidate flows of
// cfg until r ends. A request that does not decode fails it with a
// *ProtocolError; a log that decodes but does not fold is answered as
// unreadable.
func Serve(ctx context.Context, r io.Reader, w io.Writer, cfg loom.Config) error {
	rt, err := Candidate(cfg)
	if err != nil {
		return err
	}
	defer rt.Close()
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	hello := Hello{Hello: ProtocolVersion}
	for _, f := range rt.Flows() {
		hello.Flows = append(hello.Flows, f.ID)
	}
	if err := enc.Encode(hello); err != nil {
		return err
	}
	if err := out.Flush(); err != nil {
		return err
	}
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 0, 1<<20), MaxRequestBytes)
	for line := 1; in.Scan(); line++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var req Request
		if err := event.UnmarshalExactKnown(in.Bytes(), &req); err != nil {
			return &ProtocolError{Line: line, Reason: err.Error()}
		}
		log := make([]event.Envelope, len(req.Events))
		for i, raw := range req.Events {
			e, err := event.Decode(raw, event.Limits{})
			if err != nil {
				return &ProtocolError{Line: line, Reason: fmt.Sprintf("event %d: %v", i, err)}
			}
			log[i] = e
		}
		if err := enc.Encode(rt.CheckReplay(ctx, log)); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	if err := in.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &ProtocolError{Reason: fmt.Sprintf("a line longer than %d bytes", MaxRequestBytes)}
		}
		return err
	}
	return nil
}

// Exit statuses of Main.
const (
	ExitOK       = 0 // every request answered
	ExitFailure  = 1 // the candidate could not be built, or writing failed
	ExitProtocol = 2 // a request that does not decode
)

// Main is the whole main of an app's check program: it serves the check
// protocol on stdin and stdout with the candidate flows of cfg and exits.
// Build it from the code you are about to deploy:
//
//	func main() { replay.Main(loom.Config{Flows: app.Flows(), Features: app.Features}) }
//
// then run `loom deploy check --store prod.db --with ./check` before the
// deploy: it exits 3 if any in-flight execution would not replay.
func Main(cfg loom.Config) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := Serve(ctx, os.Stdin, os.Stdout, cfg)
	stop()
	var pe *ProtocolError
	switch {
	case err == nil:
		os.Exit(ExitOK)
	case errors.As(err, &pe):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(ExitProtocol)
	default:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(ExitFailure)
	}
}
