package fold

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom/event"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors from vectorCases")

const vectorDir = "../testdata/vectors"

// vectorFile is the cross-language format: events in, canonical state out.
type vectorFile struct {
	Name          string            `json:"name"`
	Rule          string            `json:"rule"`
	SchemaVersion string            `json:"schemaVersion"`
	Events        []json.RawMessage `json:"events"`
	State         json.RawMessage   `json:"state"`
}

func TestFoldVectors(t *testing.T) {
	if *update {
		writeVectors(t)
	}
	files, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	if err != nil || len(files) < 25 {
		t.Fatalf("want at least 25 vectors in %s, found %d (%v)", vectorDir, len(files), err)
	}
	seen := map[string]bool{}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v vectorFile
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		seen[v.Name] = true
		t.Run(v.Name, func(t *testing.T) {
			if v.SchemaVersion != event.SchemaVersion {
				t.Fatalf("vector written for schema %s, fold is %s", v.SchemaVersion, event.SchemaVersion)
			}
			evs := make([]event.Envelope, len(v.Events))
			for i, raw := range v.Events {
				if evs[i], err = event.Decode(raw, event.Limits{}); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			want, err := event.Canonical(v.State)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustEncode(t, Fold(evs)); got != string(want) {
				t.Fatalf("%s\n got  %s\n want %s", v.Rule, got, want)
			}
			// A vector is a whole log: contiguous from 0, so the checked
			// fold reads it too, to the same state.
			checked, err := FoldChecked(Initial(), evs)
			if err != nil {
				t.Fatalf("the vector's log is not contiguous: %v", err)
			}
			if got := mustEncode(t, checked); got != string(want) {
				t.Fatalf("FoldChecked disagrees with Fold\n got  %s\n want %s", got, want)
			}
		})
	}
	for _, c := range vectorCases() {
		if !seen[c.name] {
			t.Errorf("vector %s has no file; run go test ./fold -run TestFoldVectors -update", c.name)
		}
	}
}

func writeVectors(t *testing.T) {
	if err := os.MkdirAll(vectorDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range vectorCases() {
		v := vectorFile{Name: c.name, Rule: c.rule, SchemaVersion: event.SchemaVersion}
		for _, e := range c.log.evs {
			b, err := event.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			v.Events = append(v.Events, b)
		}
		v.State = json.RawMessage(mustEncode(t, c.log.fold()))
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vectorDir, c.name+".json"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
