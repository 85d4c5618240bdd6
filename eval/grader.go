package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/schema"
)

// Grader scores one case's outcome. Name identifies it in reports and
// comparisons (unique within a suite). Grade returns a Grade with a Score
// in [0, 1], whether the case passes and why; an error says the grader
// could not grade (Run then records a failing Grade with the error as its
// reason). Grade is called once per case, from one goroutine at a time.
type Grader interface {
	Name() string
	Grade(ctx context.Context, s Subject) (Grade, error)
}

// FlowGrader is a Grader that runs flows of its own on the suite's
// runtime (the LLM judge's judging flow): Run registers Flows() when it
// builds the runtime, and the grader starts them through Subject.Runtime.
type FlowGrader interface {
	Grader
	Flows() []*loom.Flow
}

// Subject is what a grader judges: the case, and how its execution ended.
type Subject struct {
	Case Case
	// ExecutionID is the case's execution; a grader that runs executions
	// of its own derives their ids from it.
	ExecutionID string
	Status      fold.Status
	// Output is the recorded output, null unless the execution completed.
	Output json.RawMessage
	// Error says why the case did not complete, "" if it did.
	Error string
	// Runtime is the suite's runtime, for FlowGraders.
	Runtime *loom.Runtime
}

// Grade is one grader's verdict on one case.
type Grade struct {
	Grader string  `json:"grader"`
	Score  float64 `json:"score"`
	Pass   bool    `json:"pass"`
	Reason string  `json:"reason"`
	// Costs is what the grader itself spent on models (the LLM judge),
	// absent for a grader that calls none.
	Costs *Costs `json:"costs,omitempty"`
}

// verdict is a pass (score 1) or a fail (score 0) with its reason.
func verdict(pass bool, reason string) Grade {
	g := Grade{Pass: pass, Reason: reason}
	if pass {
		g.Score = 1
	}
	return g
}

// maxReasonBytes bounds the value a reason quotes.
const maxReasonBytes = 160

// Exact passes when the output equals the case's expected value as JSON
// (member order and whitespace aside). With Path, a JSON Pointer (RFC 6901,
// "/plan/variant"), only the values at Path of both are compared, so a
// fixture's whole recorded output can be the expected value while the
// grader checks the part that must not change. A case with no expected
// value fails, as does a Path absent from the expected value; absent from
// the output, it fails too.
type Exact struct {
	ID   string // the grader's name (default "exact")
	Path string
}

// Name implements Grader.
func (g Exact) Name() string { return nameOr(g.ID, "exact") }

// Grade implements Grader.
func (g Exact) Grade(_ context.Context, s Subject) (Grade, error) {
	if len(s.Case.Expected) == 0 {
		return verdict(false, "the case has no expected value to compare with"), nil
	}
	want, err := lookup(s.Case.Expected, g.Path)
	if err != nil {
		return verdict(false, "the expected value has nothing at "+g.Path), nil
	}
	got, err := lookup(s.Output, g.Path)
	if err != nil {
		return verdict(false, "the output has nothing at "+g.Path+" (expected "+clip(string(canonical(want)), maxReasonBytes)+")"), nil
	}
	if !sameJSON(got, want) {
		return verdict(false, fmt.Sprintf("%s is %s, expected %s", at(g.Path), clip(string(canonical(got)), maxReasonBytes),
			clip(string(canonical(want)), maxReasonBytes))), nil
	}
	return verdict(true, at(g.Path)+" equals the expected value"), nil
}

// at names a pointer in a reason.
func at(ptr string) string {
	if ptr == "" {
		return "the output"
	}
	return "the output at " + ptr
}

func nameOr(id, def string) string {
	if id != "" {
		return id
	}
	return def
}

// Regex passes when Pattern (Go RE2 syntax) matches the output at Path (a
// JSON Pointer; empty: the whole output): a JSON string's text, any other
// value's compact canonical JSON. Pattern is compiled on first use; an
// invalid one is an error (ParseSuiteFile refuses it up front).
type Regex struct {
	ID      string // the grader's name (default "regex")
	Path    string
	Pattern string
}

// Name implements Grader.
func (g Regex) Name() string { return nameOr(g.ID, "regex") }

// Grade implements Grader.
func (g Regex) Grade(_ context.Context, s Subject) (Grade, error) {
	re, err := regexp.Compile(g.Pattern)
	if err != nil {
		return Grade{}, fmt.Errorf("eval: grader %s: pattern: %w", g.Name(), err)
	}
	v, err := lookup(s.Output, g.Path)
	if err != nil {
		return verdict(false, "the output has nothing at "+g.Path), nil
	}
	if !re.MatchString(text(v)) {
		return verdict(false, fmt.Sprintf("%s (%q) does not match %s", at(g.Path), clip(text(v), maxReasonBytes), g.Pattern)), nil
	}
	return verdict(true, at(g.Path)+" matches "+g.Pattern), nil
}

// JSONSchema passes when the output at Path (a JSON Pointer; empty: the
// whole output) satisfies Schema, a JSON Schema (draft 2020-12 unless its
// "$schema" says otherwise; external references refused). The reason of a
// failure names where the value fails and which keyword, not the value.
type JSONSchema struct {
	ID     string // the grader's name (default "jsonSchema")
	Path   string
	Schema json.RawMessage
}

// Name implements Grader.
func (g JSONSchema) Name() string { return nameOr(g.ID, "jsonSchema") }

// Grade implements Grader.
func (g JSONSchema) Grade(_ context.Context, s Subject) (Grade, error) {
	sc, err := schema.Compile(string(g.Schema))
	if err != nil {
		return Grade{}, fmt.Errorf("eval: grader %s: %w", g.Name(), err)
	}
	v, err := lookup(s.Output, g.Path)
	if err != nil {
		return verdict(false, "the output has nothing at "+g.Path), nil
	}
	if _, err := sc.Parse(v); err != nil {
		var ie *schema.InvalidError
		if errors.As(err, &ie) && len(ie.Violations) > 0 {
			var parts []string
			for _, vi := range ie.Violations {
				parts = append(parts, fmt.Sprintf("at %s: %s", vi.Pointer, vi.Message))
			}
			return verdict(false, at(g.Path)+" fails the schema: "+strings.Join(parts, "; ")), nil
		}
		return verdict(false, at(g.Path)+" fails the schema: "+err.Error()), nil
	}
	return verdict(true, at(g.Path)+" satisfies the schema"), nil
}
