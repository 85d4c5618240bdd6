package goldentest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
)

var update = flag.Bool("update-histories", false,
	"rewrite the golden histories in testdata/histories from today's code; only legitimate when the change to the logs is intended")

// Updating reports whether the test binary was given -update-histories: a
// golden test then records every case (Record, Write) before it replays the
// file. The flag is registered by this package, so every test binary that
// imports it accepts it; go test wants it after the packages.
func Updating() bool { return *update }

const (
	// Format is the version of the history file format, the file's
	// "format" member.
	Format = "loom-golden-history/1"
	// Epoch is the clock at every recorded start: 2026-01-01T00:00:00Z.
	Epoch int64 = 1_767_225_600_000
	// Tick is how far the recording clock moves between two caller actions
	// (a timer fires at its wakeAt instead).
	Tick int64 = 60_000
)

// File is one file of testdata/histories, as it is decoded.
type File struct {
	Format      string            `json:"format"`
	Name        string            `json:"name"`
	Flow        string            `json:"flow"`
	Description string            `json:"description"`
	Events      []json.RawMessage `json:"events"`
}

// encode renders f in the one form the files are kept in: the header
// fields, then one canonical envelope per line.
func encode(f File) []byte {
	str := func(s string) string { return string(event.MustCanonical(mustJSON(s))) }
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"format\": %s,\n  \"name\": %s,\n  \"flow\": %s,\n  \"description\": %s,\n  \"events\": [\n",
		str(f.Format), str(f.Name), str(f.Flow), str(f.Description))
	for i, e := range f.Events {
		b.WriteString("    ")
		b.Write(e)
		if i < len(f.Events)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes()
}

// Canonical is an envelope as the store holds it (event.Encode), in
// canonical JSON: the bytes the histories compare. It fails only where
// event.Encode does.
func Canonical(e event.Envelope) ([]byte, error) {
	b, err := event.Encode(e)
	if err != nil {
		return nil, err
	}
	return event.Canonical(b)
}

// History is a history file read back, checked and understood.
type History struct {
	File File
	// Raw holds the canonical envelopes as the file holds them, Events the
	// same envelopes decoded.
	Raw    [][]byte
	Events []event.Envelope
	// ID is the execution id.
	ID string
	// Actions is the scenario, derived from the log (see deriveActions).
	Actions []Action
}

// Load reads dir/<name>.json and fails the test on a file not in Write's
// exact form, an envelope that is not canonical or does not decode exactly
// (event.Decode), a log that is not one execution of the file's flow with
// sequences contiguous from 0, and a log whose caller actions cannot be
// derived. The caller checks the flow and description against its case.
func Load(t testing.TB, dir, name string) *History {
	t.Helper()
	path := filepath.Join(dir, name+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with -update-histories: testdata/histories/README.md)", err)
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if f.Format != Format || f.Name != name {
		t.Fatalf("%s: format %q name %q, want %q and %q", path, f.Format, f.Name, Format, name)
	}
	if !bytes.Equal(encode(f), data) {
		t.Fatalf("%s is not in the form the recorder writes (edited by hand?); regenerate it", path)
	}
	h := &History{File: f}
	flow := f.Flow // the file's flow: the start's, until a migration moves it
	for i, raw := range f.Events {
		e, err := event.Decode(raw, event.Limits{})
		if err != nil {
			t.Fatalf("%s: event %d: %v", path, i, err)
		}
		c, err := Canonical(e)
		if err != nil || !bytes.Equal(c, raw) {
			t.Fatalf("%s: event %d is not a canonical envelope (%v):\n%s\n%s", path, i, err, raw, c)
		}
		if e.Type == event.ExecutionMigrated {
			flow = e.WorkflowID // a ResumeAs onto another flow writes the rest under its id
		}
		if e.Sequence != int64(i) || e.WorkflowID != flow || (i > 0 && e.ExecutionID != h.ID) {
			t.Fatalf("%s: event %d (sequence %d, flow %q, execution %q) is not the next event of one execution of %s",
				path, i, e.Sequence, e.WorkflowID, e.ExecutionID, flow)
		}
		h.ID = e.ExecutionID
		h.Raw = append(h.Raw, raw)
		h.Events = append(h.Events, e)
	}
	if h.Actions, err = deriveActions(h.Events); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return h
}

// Write records log as dir/<name>.json. A file the new recording matches
// (up to a Parallel block's interleaving, see Diff) under the same header
// is left as it is, so regenerating without a change to the log changes no
// file. A write that fails fails the test.
func Write(t testing.TB, dir, name, flowID, description string, log []event.Envelope) {
	t.Helper()
	f := File{Format: Format, Name: name, Flow: flowID, Description: description}
	for _, e := range log {
		c, err := Canonical(e)
		if err != nil {
			t.Fatal(err)
		}
		f.Events = append(f.Events, c)
	}
	path := filepath.Join(dir, name+".json")
	var old File
	if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &old) == nil &&
		old.Format == f.Format && old.Flow == f.Flow && old.Description == f.Description {
		raw := make([][]byte, len(old.Events))
		for i, e := range old.Events {
			raw[i] = e
		}
		if msg, _ := Diff(raw, log); msg == "" {
			return
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, encode(f), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// Claim fails the test (without stopping it) on every file of dir that
// owns says is the caller's and that names, the caller's cases, lacks: a
// history no case replays.
func Claim(t testing.TB, dir string, names []string, owns func(name string) bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if owns(name) && !slices.Contains(names, name) {
			t.Errorf("%s is replayed by no case: add its case or remove the file", f)
		}
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
