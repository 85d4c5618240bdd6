package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strconv"

	"github.com/loom-kernel/loom/event"
)

// MaxFrameBytes caps one line of an event stream the Client reads: an
// envelope with the largest payload a store accepts (16 MiB) and its
// framing fits.
const MaxFrameBytes = 32 << 20

// ErrStreamEnded is the Err of a Subscription whose connection ended
// without the server saying why; resubscribe from the next sequence.
var ErrStreamEnded = errors.New("wire: the event stream ended unexpectedly")

// stream is the client side of an event stream of T: a goroutine reads
// the frames and delivers the items in order until the stream ends.
type stream[T any] struct {
	items  chan T
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	// last is the sequence of the last item delivered (-1 before any, and
	// for streams whose items have none); lastID its event id.
	last   int64
	lastID string
}

func (s *stream[T]) wait() { <-s.done }

func (s *stream[T]) stop() {
	s.cancel()
	<-s.done
}

// dialStream posts method and, once the server answers with an event
// stream, reads it in the background: decode turns each frame named name
// (with its event id) into an item and its sequence. A refusal before the
// stream starts is returned as the server's *Error.
func dialStream[T any](c *Client, ctx context.Context, method string, params any, header map[string]string,
	name string, decode func(id string, data []byte) (T, int64, error)) (*stream[T], error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.postWith(ctx, method, params, "text/event-stream", header)
	if err != nil {
		cancel()
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		defer cancel()
		defer resp.Body.Close()
		if err := c.decodeResponse(resp, nil); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("wire: %s answered %s without an event stream", c.endpoint, method)
	}
	s := &stream[T]{items: make(chan T), cancel: cancel, done: make(chan struct{}), last: -1}
	go func() {
		defer close(s.done)
		defer close(s.items)
		defer resp.Body.Close()
		err := readFrames(resp.Body, func(got, id string, data []byte) (bool, error) {
			if got != name {
				return true, nil
			}
			item, seq, err := decode(id, data)
			if err != nil {
				return false, err
			}
			select {
			case s.items <- item:
				s.last, s.lastID = seq, id
				return true, nil
			case <-ctx.Done():
				return false, nil
			}
		})
		if ctx.Err() == nil {
			s.err = err
		}
	}()
	return s, nil
}

// Subscription delivers the envelopes of one execution.subscribe stream in
// sequence order until it is closed, its context ends, or the stream fails.
type Subscription struct{ s *stream[event.Envelope] }

// Events is closed when the subscription ends; then Err says why.
func (s *Subscription) Events() <-chan event.Envelope { return s.s.items }

// Err returns why the subscription ended: nil after Close or the end of its
// context, an *Error the server sent (CodeUnavailable when it is stopping),
// ErrStreamEnded, or a decoding error. Call it once Events is closed.
func (s *Subscription) Err() error {
	s.s.wait()
	return s.s.err
}

// Last returns the sequence of the last envelope delivered, -1 before any:
// resubscribe from Last()+1 to go on where it ended.
func (s *Subscription) Last() int64 {
	s.s.wait()
	return s.s.last
}

// Close ends the subscription and waits for its goroutine to exit.
func (s *Subscription) Close() { s.s.stop() }

// Subscribe calls execution.subscribe: every envelope of the execution with
// sequence >= p.From, those already stored first, then each new one as soon
// as it is durable. A refusal (unknown execution, denied, bad params) is
// returned here as an *Error; later failures end the Subscription and are
// reported by its Err. Each envelope is decoded strictly (event.Decode).
func (c *Client) Subscribe(ctx context.Context, p SubscribeParams) (*Subscription, error) {
	s, err := dialStream(c, ctx, MethodSubscribe, p, nil, "envelope", func(_ string, data []byte) (event.Envelope, int64, error) {
		e, err := event.Decode(data, event.Limits{})
		if err != nil {
			return e, 0, fmt.Errorf("wire: an envelope on the stream: %w", err)
		}
		return e, e.Sequence, nil
	})
	if err != nil {
		return nil, err
	}
	return &Subscription{s: s}, nil
}

// readFrames parses an event stream (the SSE format: "field: value" lines,
// a blank line ends an event, ":" starts a comment) and hands each event
// but "error" to on, with the last id the stream set, until on says stop
// or the stream ends; an "error" event ends it with the *Error it carries.
func readFrames(body io.Reader, on func(name, id string, data []byte) (more bool, err error)) error {
	r := bufio.NewReaderSize(body, 64<<10)
	var name, id string
	var data bytes.Buffer
	for {
		line, err := readLine(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return ErrStreamEnded
			}
			return err
		}
		if len(line) > 0 {
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "": // a comment: keep-alive
			case "event":
				name = string(value)
			case "id":
				id = string(value)
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.Write(value)
			}
			continue
		}
		if name == "error" {
			var we Error
			if err := json.Unmarshal(data.Bytes(), &we); err != nil {
				return fmt.Errorf("wire: an unreadable error event on the stream")
			}
			return &we
		}
		if name != "" {
			if more, err := on(name, id, data.Bytes()); err != nil || !more {
				return err
			}
		}
		name = ""
		data.Reset()
	}
}

// readLine reads one line without its end (LF or CRLF), refusing one over
// MaxFrameBytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxFrameBytes {
			return nil, errors.New("wire: an event-stream line over " + strconv.Itoa(MaxFrameBytes) + " bytes")
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
		return line, nil
	}
}
