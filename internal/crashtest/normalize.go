package crashtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"

	"github.com/loom-kernel/loom/fold"
)

// Normalize returns s as a generic JSON tree (through fold.Encode, numbers
// kept as json.Number) without the fields a crash and its recovery may
// legitimately change, and nothing else:
//
//   - the state's startedAt, updatedAt and sequence;
//   - each frame's startedAt, endedAt and seq;
//   - each decision's seq and each resume entry's seq;
//   - _recoveries (recovery appends EXECUTION_RECOVERED).
//
// Recovery shifts sequences by the events it adds and timestamps by when it
// ran; statuses, outputs, inputs, attempts, decisions' choices and gate
// answers must match an uncrashed run exactly.
func Normalize(s fold.State) (map[string]any, error) {
	b, err := fold.Encode(s)
	if err != nil {
		return nil, fmt.Errorf("crashtest: encoding state: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("crashtest: decoding state: %w", err)
	}
	strip(m, "startedAt", "updatedAt", "sequence")
	for _, fr := range children(m["frames"]) {
		strip(fr, "startedAt", "endedAt", "seq")
	}
	vars, _ := m["variables"].(map[string]any)
	if vars != nil {
		strip(vars, "_recoveries")
		for _, d := range children(vars["_decisions"]) {
			strip(d, "seq")
		}
		if entries, ok := vars["_resumePayloads"].([]any); ok {
			for _, e := range entries {
				if em, ok := e.(map[string]any); ok {
					strip(em, "seq")
				}
			}
		}
	}
	return m, nil
}

func strip(m map[string]any, keys ...string) {
	for _, k := range keys {
		delete(m, k)
	}
}

// children returns the object values of an object keyed by id (frames,
// decisions).
func children(v any) []map[string]any {
	m, _ := v.(map[string]any)
	out := make([]map[string]any, 0, len(m))
	for _, c := range m { //loom:order-independent each child is edited alone
		if cm, ok := c.(map[string]any); ok {
			out = append(out, cm)
		}
	}
	return out
}

// Diff describes where two normalised states differ (every differing path,
// sorted), or returns "" when they are equal.
func Diff(want, got map[string]any) string {
	var paths []string
	diffValue("$", want, got, &paths)
	if len(paths) == 0 {
		return ""
	}
	sort.Strings(paths)
	const maxShown = 12
	if len(paths) > maxShown {
		paths = append(paths[:maxShown], fmt.Sprintf("… and %d more", len(paths)-maxShown))
	}
	var buf bytes.Buffer
	for _, p := range paths {
		buf.WriteString("\n  ")
		buf.WriteString(p)
	}
	return buf.String()
}

func diffValue(path string, want, got any, out *[]string) {
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if wok && gok {
		for k, wv := range wm { //loom:order-independent paths are sorted by Diff
			gv, ok := gm[k]
			if !ok {
				gv = absent{}
			}
			diffValue(path+"."+k, wv, gv, out)
		}
		for k, gv := range gm { //loom:order-independent paths are sorted by Diff
			if _, ok := wm[k]; !ok {
				diffValue(path+"."+k, absent{}, gv, out)
			}
		}
		return
	}
	ws, wok := want.([]any)
	gs, gok := got.([]any)
	if wok && gok && len(ws) == len(gs) {
		for i := range ws {
			diffValue(path+"["+strconv.Itoa(i)+"]", ws[i], gs[i], out)
		}
		return
	}
	if !reflect.DeepEqual(want, got) {
		*out = append(*out, fmt.Sprintf("%s: want %s, got %s", path, compact(want), compact(got)))
	}
}

// absent stands for a key one side lacks, distinct from a JSON null.
type absent struct{}

// compact renders a value for a diff line, cut to a readable length.
func compact(v any) string {
	if _, ok := v.(absent); ok {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	const maxLen = 120
	if len(b) > maxLen {
		return string(b[:maxLen]) + "…"
	}
	return string(b)
}
