package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/fold"
)

func (c *cli) diffCommand() *cobra.Command {
	var (
		storeSpec string
		from, to  sequenceValue
	)
	cmd := &cobra.Command{
		Use:   "diff <id> --from A [--to B]",
		Short: "Show what changed in the folded state between two sequences",
		Long: `diff folds an execution at two sequences and lists what changed between
them, as JSON Pointer paths into the canonical state: added (+), removed (-)
and changed (~) values. --to defaults to the last event. A sequence past
the end of the log is refused (exit 4), saying where it ends.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if !from.set {
				return usagef("--from is required: the sequence to compare from (0 is the start)")
			}
			end := int64(-1)
			if to.set {
				end = to.n
			}
			if from.n < 0 || (to.set && to.n < 0) {
				return usagef("--from and --to must be 0 or more")
			}
			return c.withStore(storeSpec, func(s *openedStore) error { return c.diff(s, a[0], from.n, end) })
		},
	}
	storeFlag(cmd, &storeSpec)
	sequenceFlag(cmd, &from, "from", "compare from the state after this `sequence` (required)")
	sequenceFlag(cmd, &to, "to", "to the state after this `sequence` (default: the last)")
	return cmd
}

// change is a value added or removed at a path.
type change struct {
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// edit is a value changed at a path.
type edit struct {
	Path string `json:"path"`
	From any    `json:"from"`
	To   any    `json:"to"`
}

// stateDiff is what diff prints with --json.
type stateDiff struct {
	ExecutionID string   `json:"executionId"`
	From        int64    `json:"from"`
	To          int64    `json:"to"`
	Added       []change `json:"added"`
	Removed     []change `json:"removed"`
	Changed     []edit   `json:"changed"`
}

func (c *cli) diff(s *openedStore, id string, from, to int64) error {
	a, err := c.stateAt(s, id, from)
	if err != nil {
		return err
	}
	b, err := c.stateAt(s, id, to)
	if err != nil {
		return err
	}
	d := stateDiff{ExecutionID: id, From: a.Sequence, To: b.Sequence, Added: []change{}, Removed: []change{}, Changed: []edit{}}
	if err := diffStates(a, b, &d); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(d)
	}
	fmt.Fprintf(c.stdout, "diff %s #%d → #%d: %d added, %d removed, %d changed\n", id, d.From, d.To, len(d.Added), len(d.Removed), len(d.Changed))
	for _, ch := range d.Added {
		fmt.Fprintf(c.stdout, "+ %s: %s\n", ch.Path, render(ch.Value))
	}
	for _, ch := range d.Removed {
		fmt.Fprintf(c.stdout, "- %s: %s\n", ch.Path, render(ch.Value))
	}
	for _, ch := range d.Changed {
		fmt.Fprintf(c.stdout, "~ %s: %s → %s\n", ch.Path, render(ch.From), render(ch.To))
	}
	return nil
}

// diffStates compares the canonical encodings of two states.
func diffStates(a, b fold.State, d *stateDiff) error {
	av, err := canonicalTree(a)
	if err != nil {
		return err
	}
	bv, err := canonicalTree(b)
	if err != nil {
		return err
	}
	walk("", av, bv, d)
	return nil
}

// canonicalTree decodes a state's canonical JSON with numbers kept as
// written (json.Number), so no value is re-encoded through a float.
func canonicalTree(s fold.State) (any, error) {
	raw, err := fold.Encode(s)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	return v, dec.Decode(&v)
}

// walk records the differences under path, objects key by key in sorted
// order and arrays index by index.
func walk(path string, a, b any, d *stateDiff) {
	am, aObj := a.(map[string]any)
	bm, bObj := b.(map[string]any)
	if aObj && bObj {
		keys := slices.Sorted(maps.Keys(am))
		for k := range bm { //loom:sorted merged into keys, sorted below
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			av, inA := am[k]
			bv, inB := bm[k]
			p := path + "/" + pointerEscape(k)
			switch {
			case !inA:
				d.Added = append(d.Added, change{Path: p, Value: bv})
			case !inB:
				d.Removed = append(d.Removed, change{Path: p, Value: av})
			default:
				walk(p, av, bv, d)
			}
		}
		return
	}
	as, aArr := a.([]any)
	bs, bArr := b.([]any)
	if aArr && bArr {
		for i := range max(len(as), len(bs)) {
			p := path + "/" + strconv.Itoa(i)
			switch {
			case i >= len(as):
				d.Added = append(d.Added, change{Path: p, Value: bs[i]})
			case i >= len(bs):
				d.Removed = append(d.Removed, change{Path: p, Value: as[i]})
			default:
				walk(p, as[i], bs[i], d)
			}
		}
		return
	}
	if jsonText(a) != jsonText(b) {
		if path == "" {
			path = "/"
		}
		d.Changed = append(d.Changed, edit{Path: path, From: a, To: b})
	}
}

// pointerEscape escapes a JSON Pointer token (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// jsonText renders a decoded value as compact JSON (map keys sorted).
func jsonText(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return string(bytes.TrimSpace(buf.Bytes()))
}

// render is jsonText cut for a line of output.
func render(v any) string { return short(json.RawMessage(jsonText(v)), 120) }
