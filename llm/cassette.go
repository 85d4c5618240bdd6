package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// CassetteVersion is the version of the cassette file format.
const CassetteVersion = 1

// CassetteMode is what a cassette does with a request.
type CassetteMode int

const (
	// Replay serves recorded responses and refuses any other request.
	Replay CassetteMode = iota
	// Record sends each request to the wrapped provider and records the
	// answer (or its failure); Save writes the file.
	Record
)

// CassetteOptions configures OpenCassette.
type CassetteOptions struct {
	Mode CassetteMode
	// Provider is the real provider a recording cassette wraps.
	Provider Provider
	// ScrubRequest rewrites a request before it is digested and recorded,
	// in both modes (so a scrubbed request still matches on replay): drop
	// an e-mail address, a ticket number, a timestamp.
	ScrubRequest func(Request) Request
	// ScrubResponse rewrites a response before it is recorded.
	ScrubResponse func(Response) Response
}

// Interaction is one recorded call: the request's digest, the request, and
// the response or the failure it got.
type Interaction struct {
	Digest   string    `json:"digest"`
	Request  Request   `json:"request"`
	Response *Response `json:"response,omitempty"`
	Failure  *Failure  `json:"failure,omitempty"`
}

// cassetteFile is the JSON file.
type cassetteFile struct {
	Version      int           `json:"version"`
	Provider     string        `json:"provider"`
	Interactions []Interaction `json:"interactions"`
}

// Cassette is a record/replay Provider (a VCR): tests and demos run
// offline and deterministically on what a real provider once answered.
// Cassettes sit above the wire: HTTP headers, and so API keys, are never
// part of one; ScrubRequest and ScrubResponse remove what the content
// should not keep. It is safe for concurrent use.
type Cassette struct {
	path string
	opts CassetteOptions
	name string

	mu       sync.Mutex
	file     cassetteFile
	byDigest map[string]int
	dirty    bool
}

// OpenCassette opens the cassette file at path. In Replay mode the file
// must exist; in Record mode a missing file starts an empty cassette and an
// existing one is extended (a recorded digest is served, not re-recorded).
func OpenCassette(path string, opts CassetteOptions) (*Cassette, error) {
	if opts.Mode == Record && opts.Provider == nil {
		return nil, fmt.Errorf("llm: cassette %s: recording needs the Provider to record", path)
	}
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		return newCassette(path, raw, opts)
	case errors.Is(err, os.ErrNotExist) && opts.Mode == Record:
		return newCassette(path, nil, opts)
	}
	return nil, fmt.Errorf("llm: cassette %s: %w (record it first with the Record mode)", path, err)
}

// ReadCassette is a replaying cassette over data, the bytes of a cassette
// file (one embedded in a binary, say); name is what its refusals call it.
func ReadCassette(name string, data []byte, opts CassetteOptions) (*Cassette, error) {
	if opts.Mode != Replay {
		return nil, fmt.Errorf("llm: cassette %s: a cassette read from bytes only replays; record into a file with OpenCassette", name)
	}
	return newCassette(name, data, opts)
}

// newCassette decodes a cassette file's bytes (none: an empty cassette).
func newCassette(path string, raw []byte, opts CassetteOptions) (*Cassette, error) {
	c := &Cassette{path: path, opts: opts, byDigest: map[string]int{}, file: cassetteFile{Version: CassetteVersion}}
	if raw != nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c.file); err != nil {
			return nil, fmt.Errorf("llm: cassette %s: %w", path, err)
		}
		if c.file.Version != CassetteVersion {
			return nil, fmt.Errorf("llm: cassette %s: version %d, this build reads %d", path, c.file.Version, CassetteVersion)
		}
		for i, in := range c.file.Interactions {
			c.byDigest[in.Digest] = i
		}
	}
	c.name = c.file.Provider
	if opts.Provider != nil {
		c.name = opts.Provider.Name()
		c.file.Provider = c.name
	}
	if c.name == "" {
		c.name = "cassette"
	}
	return c, nil
}

// Name is the recorded provider's name, so a replayed call is recorded
// under the same tool id as the live one.
func (c *Cassette) Name() string { return c.name }

// Models lists the models the recorded requests asked for, in the order
// they were first recorded.
func (c *Cassette) Models() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, in := range c.file.Interactions {
		if !seen[in.Request.Model] {
			seen[in.Request.Model] = true
			out = append(out, in.Request.Model)
		}
	}
	return out
}

// Len is the number of recorded interactions.
func (c *Cassette) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.file.Interactions)
}

// Complete serves a recorded answer, or, recording, calls the wrapped
// provider and records what it answered. A streamed replay sends the
// recorded text and tool arguments to sink as deltas. Replaying a request
// the cassette does not hold fails with *UnrecordedRequestError.
func (c *Cassette) Complete(ctx context.Context, req Request, sink func(Delta)) (Response, error) {
	sent := req
	if c.opts.ScrubRequest != nil {
		req = c.opts.ScrubRequest(cloneRequest(req)) // the scrub edits a deep copy, never the caller's
	}
	digest, err := Digest(req)
	if err != nil {
		return Response{}, err
	}
	c.mu.Lock()
	i, ok := c.byDigest[digest]
	var in Interaction
	if ok {
		in = c.file.Interactions[i]
	}
	c.mu.Unlock()
	if ok {
		return c.serve(ctx, in, sink)
	}
	if c.opts.Mode != Record {
		return Response{}, c.unrecorded(digest, req)
	}
	resp, err := c.opts.Provider.Complete(ctx, sent, sink)
	rec := Interaction{Digest: digest, Request: req}
	var perr *Error
	switch {
	case err == nil:
		if c.opts.ScrubResponse != nil {
			resp = c.opts.ScrubResponse(resp)
		}
		rec.Response = &resp
	case errors.As(err, &perr) && perr.Kind.Typed():
		f, _ := FailureOf(perr)
		rec.Failure = &f
	default:
		return Response{}, err // transport trouble and cancels are not recorded
	}
	c.mu.Lock()
	if _, dup := c.byDigest[digest]; !dup {
		c.byDigest[digest] = len(c.file.Interactions)
		c.file.Interactions = append(c.file.Interactions, rec)
		c.dirty = true
	}
	c.mu.Unlock()
	return resp, err
}

// serve answers from a recorded interaction.
func (c *Cassette) serve(ctx context.Context, in Interaction, sink func(Delta)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	if in.Failure != nil {
		f := in.Failure
		e := NewError(f.Provider, f.Kind, f.Status, f.Message, nil)
		e.RetryAfter = msDuration(f.RetryAfterMs)
		return Response{}, e
	}
	resp := cloneResponse(*in.Response)
	if sink != nil {
		replayDeltas(resp, sink)
	}
	return resp, nil
}

// Save writes a recording cassette's file (indented JSON, interactions in
// the order they were recorded), atomically. A replaying or unchanged
// cassette writes nothing.
func (c *Cassette) Save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // a readable file: <, > and & as written
	enc.SetIndent("", "  ")
	if err := enc.Encode(c.file); err != nil {
		return fmt.Errorf("llm: cassette %s: %w", c.path, err)
	}
	raw := buf.Bytes()
	tmp := c.path + ".tmp"
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return fmt.Errorf("llm: cassette %s: %w", c.path, err)
	}
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return fmt.Errorf("llm: cassette %s: %w", c.path, err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		return fmt.Errorf("llm: cassette %s: %w", c.path, err)
	}
	c.dirty = false
	return nil
}

// UnrecordedRequestError is a replaying cassette's refusal of a request it
// does not hold: the request's digest, and the recorded request nearest to
// it with where the two first differ.
type UnrecordedRequestError struct {
	Path    string
	Digest  string
	Nearest string // the nearest recorded request's digest, "" for an empty cassette
	// Differs describes where the request departs from the nearest one.
	Differs string
}

func (e *UnrecordedRequestError) Error() string {
	msg := fmt.Sprintf("llm: cassette %s holds no request %s", e.Path, e.Digest)
	if e.Nearest != "" {
		msg += fmt.Sprintf("; the nearest recorded one is %s (%s)", e.Nearest, e.Differs)
	}
	return msg + "; re-record the cassette if the prompt changed on purpose"
}

// unrecorded builds the refusal, naming the recorded request sharing the
// longest prefix of canonical JSON with req.
func (c *Cassette) unrecorded(digest string, req Request) error {
	e := &UnrecordedRequestError{Path: c.path, Digest: digest}
	want, _ := json.Marshal(req)
	c.mu.Lock()
	defer c.mu.Unlock()
	best := -1
	for _, in := range c.file.Interactions {
		got, _ := json.Marshal(in.Request)
		if n := commonPrefix(want, got); n > best {
			best, e.Nearest = n, in.Digest
			e.Differs = describeDifference(want, got, n)
		}
	}
	return e
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// describeDifference quotes a little of both requests where they diverge.
func describeDifference(want, got []byte, at int) string {
	quote := func(b []byte) string {
		end := min(at+40, len(b))
		return strings.ToValidUTF8(string(b[at:end]), "?")
	}
	start := max(at-40, 0)
	return fmt.Sprintf("after %q this request has %q, the recorded one %q",
		strings.ToValidUTF8(string(want[start:at]), "?"), quote(want), quote(got))
}

// replayDeltas streams a recorded response: its text in word-sized pieces,
// then each tool call's arguments in two pieces.
func replayDeltas(resp Response, sink func(Delta)) {
	text := resp.Text
	for text != "" {
		cut := strings.IndexByte(text[1:], ' ')
		if cut < 0 {
			sink(Delta{Text: text})
			break
		}
		sink(Delta{Text: text[:cut+1]})
		text = text[cut+1:]
	}
	for i, tc := range resp.ToolCalls {
		args := string(tc.Arguments)
		half := len(args) / 2
		sink(Delta{ToolIndex: i, ToolID: tc.ID, ToolName: tc.Name, Arguments: args[:half]})
		sink(Delta{ToolIndex: i, Arguments: args[half:]})
	}
}

// cloneRequest is a deep copy of r (through its JSON form, which is
// lossless for a Request).
func cloneRequest(r Request) Request {
	raw, err := json.Marshal(r)
	if err != nil {
		return r
	}
	var c Request
	if json.Unmarshal(raw, &c) != nil {
		return r
	}
	return c
}

func cloneResponse(r Response) Response {
	r.ToolCalls = append([]ToolCall(nil), r.ToolCalls...)
	return r
}
