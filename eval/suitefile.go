package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/schema"
	"github.com/loom-kernel/loom/llm"
)

// SuiteFormat is the "format" member every suite file starts with.
const SuiteFormat = "loom-eval-suite/1"

// MaxSuiteFileBytes bounds a suite file, and each log file it names.
const MaxSuiteFileBytes = 16 << 20

// ErrBadSuiteFile matches every refusal of ParseSuiteFile and ReadSuiteFile.
var ErrBadSuiteFile = errors.New("eval: bad suite file")

// SuiteFileError says what is wrong in a suite file: the file, the member
// (a path such as cases[2].answers[0].gate; empty for the whole file),
// the problem and what to do about it. It matches ErrBadSuiteFile.
type SuiteFileError struct {
	File    string
	Member  string
	Problem string
	Fix     string
}

func (e *SuiteFileError) Error() string {
	msg := "eval: suite file " + e.File + ": "
	if e.Member != "" {
		msg += "member " + e.Member + " "
	}
	msg += e.Problem
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

// Is makes errors.Is(err, ErrBadSuiteFile) true.
func (e *SuiteFileError) Is(target error) bool { return target == ErrBadSuiteFile }

// SuiteFileOptions are what a suite file's names resolve against.
type SuiteFileOptions struct {
	// Providers are the model providers an llmJudge grader may name with
	// "provider".
	Providers map[string]llm.Provider
	// Dir is the directory relative "log" and "cassette" paths are read
	// from (ReadSuiteFile: the suite file's own directory; default: the
	// working directory).
	Dir string
}

// ReadSuiteFile reads and parses the suite file at path (see
// ParseSuiteFile), resolving its relative paths against its directory.
func ReadSuiteFile(path string, opts SuiteFileOptions) (Suite, error) {
	data, err := readBounded(path)
	if err != nil {
		return Suite{}, &SuiteFileError{File: path, Problem: err.Error(), Fix: "give the path of a readable suite file"}
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Dir(path)
	}
	return ParseSuiteFile(path, data, opts)
}

// readBounded reads a file of at most MaxSuiteFileBytes.
func readBounded(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > MaxSuiteFileBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d allowed", path, fi.Size(), MaxSuiteFileBytes)
	}
	return os.ReadFile(path)
}

// ParseSuiteFile parses a suite file's bytes (name is what errors call
// the file). The format, in JSON:
//
//	{
//	  "format": "loom-eval-suite/1",
//	  "name": "incident",                  // suite name
//	  "flow": "incident.remediate",        // the flow every case runs
//	  "cases": [
//	    {"name": "approved", "input": {…}, "answers": [{"gate": "approve*", "payload": {…}}], "expected": {…}},
//	    {"log": "histories/run-1.json"}    // a fixture: CaseFromLog of a recorded log
//	  ],
//	  "graders": [
//	    {"type": "exact", "id": "same-plan", "path": "/plan"},
//	    {"type": "regex", "path": "/outcome", "pattern": "^fixed$"},
//	    {"type": "jsonSchema", "schema": {"type": "object", "required": ["outcome"]}},
//	    {"type": "llmJudge", "cassette": "judge.json", "model": "m", "rubric": "…", "passScore": 0.7}
//	  ],
//	  "thresholds": {"passRateDrop": 0, "meanScoreDrop": 0.05, "scoreDrop": 0.2, "costIncrease": 0.1}
//	}
//
// It is strict: an unknown member (anywhere), a member given twice, a
// value of the wrong type, a missing required member, an invalid regex or
// schema, a judge naming an unknown provider, and everything
// Suite.Validate refuses is a *SuiteFileError naming the member and what
// to do. A "log" case reads a JSON array of envelopes, or an object with
// an "events" array (a golden history file), and may also carry only a
// "name". An llmJudge names its model either by "provider" (one of
// opts.Providers) or by "cassette", a cassette file replayed in Replay
// mode, so the suite runs offline and grades the same on every run.
func ParseSuiteFile(name string, data []byte, opts SuiteFileOptions) (Suite, error) {
	p := fileParser{file: name, opts: opts}
	s, err := p.suite(data)
	if err != nil {
		return Suite{}, err
	}
	if err := s.Validate(); err != nil {
		return Suite{}, &SuiteFileError{File: name, Problem: strings.TrimPrefix(err.Error(), ErrInvalidSuite.Error()+": ")}
	}
	return s, nil
}

// fileParser reads one suite file, naming it in every error.
type fileParser struct {
	file string
	opts SuiteFileOptions
}

func (p *fileParser) fail(member, problem, fix string) error {
	return &SuiteFileError{File: p.file, Member: member, Problem: problem, Fix: fix}
}

func (p *fileParser) suite(data []byte) (Suite, error) {
	m, err := p.object(data, "", "format", "name", "flow", "cases", "graders", "thresholds")
	if err != nil {
		return Suite{}, err
	}
	format, err := p.str(m, "", "format", true)
	if err != nil {
		return Suite{}, err
	}
	if format != SuiteFormat {
		return Suite{}, p.fail("format", fmt.Sprintf("is %q, this build reads %q", format, SuiteFormat), `write "format": "`+SuiteFormat+`"`)
	}
	var s Suite
	if s.Name, err = p.str(m, "", "name", true); err != nil {
		return Suite{}, err
	}
	if s.Flow, err = p.str(m, "", "flow", true); err != nil {
		return Suite{}, err
	}
	cases, err := p.array(m, "", "cases", MaxCases)
	if err != nil {
		return Suite{}, err
	}
	for i, raw := range cases {
		c, err := p.caseOf(raw, index("cases", i))
		if err != nil {
			return Suite{}, err
		}
		s.Cases = append(s.Cases, c)
	}
	graders, err := p.array(m, "", "graders", MaxGraders)
	if err != nil {
		return Suite{}, err
	}
	for i, raw := range graders {
		g, err := p.grader(raw, index("graders", i))
		if err != nil {
			return Suite{}, err
		}
		s.Graders = append(s.Graders, g)
	}
	if raw, ok := m["thresholds"]; ok {
		if s.Thresholds, err = p.thresholds(raw); err != nil {
			return Suite{}, err
		}
	}
	return s, nil
}

func (p *fileParser) caseOf(raw json.RawMessage, path string) (Case, error) {
	m, err := p.object(raw, path, "name", "input", "answers", "expected", "log")
	if err != nil {
		return Case{}, err
	}
	name, err := p.str(m, path, "name", false)
	if err != nil {
		return Case{}, err
	}
	if _, ok := m["log"]; ok {
		return p.fixture(m, path, name)
	}
	if name == "" {
		return Case{}, p.fail(join(path, "name"), "is missing", "name the case (or give a \"log\" to build it from)")
	}
	c := Case{Name: name, Input: m["input"], Expected: m["expected"]}
	answers, err := p.array(m, path, "answers", MaxAnswers)
	if err != nil {
		return Case{}, err
	}
	for i, raw := range answers {
		ap := index(join(path, "answers"), i)
		am, err := p.object(raw, ap, "gate", "payload")
		if err != nil {
			return Case{}, err
		}
		gate, err := p.str(am, ap, "gate", true)
		if err != nil {
			return Case{}, err
		}
		c.Answers = append(c.Answers, Answer{Gate: gate, Payload: am["payload"]})
	}
	return c, nil
}

// fixture builds a case from the log file a case names.
func (p *fileParser) fixture(m map[string]json.RawMessage, path, name string) (Case, error) {
	for _, k := range []string{"input", "answers", "expected"} {
		if _, ok := m[k]; ok {
			return Case{}, p.fail(join(path, k), "cannot be given with \"log\"", "a fixture's input, answers and expected value come from its log: remove it, or drop \"log\"")
		}
	}
	file, err := p.str(m, path, "log", true)
	if err != nil {
		return Case{}, err
	}
	log, err := readLogFile(p.resolve(file))
	if err != nil {
		return Case{}, p.fail(join(path, "log"), err.Error(), "give a log file: a JSON array of envelopes, or an object with an \"events\" array")
	}
	c, err := CaseFromLog(log)
	if err != nil {
		return Case{}, p.fail(join(path, "log"), err.Error(), "pick a log of a completed execution")
	}
	if name != "" {
		c.Name = name
	}
	return c, nil
}

// resolve is a path relative to the suite file's directory.
func (p *fileParser) resolve(file string) string {
	if filepath.IsAbs(file) || p.opts.Dir == "" {
		return file
	}
	return filepath.Join(p.opts.Dir, file)
}

// readLogFile reads a log: an array of envelopes, or an object holding
// one as "events" (the golden history format), each envelope decoded
// strictly (event.Decode).
func readLogFile(path string) ([]event.Envelope, error) {
	data, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		var wrapped struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := event.UnmarshalExact(data, &wrapped); err != nil || wrapped.Events == nil {
			return nil, fmt.Errorf("%s holds no log", path)
		}
		raws = wrapped.Events
	}
	log := make([]event.Envelope, 0, len(raws))
	for i, raw := range raws {
		e, err := event.Decode(raw, event.Limits{})
		if err != nil {
			return nil, fmt.Errorf("%s: event %d: %w", path, i, err)
		}
		log = append(log, e)
	}
	return log, nil
}

// graderMembers are the members each grader type takes.
var graderMembers = map[string][]string{
	"exact":      {"type", "id", "path"},
	"regex":      {"type", "id", "path", "pattern"},
	"jsonSchema": {"type", "id", "path", "schema"},
	"llmJudge":   {"type", "id", "path", "provider", "cassette", "model", "rubric", "passScore", "maxTokens"},
}

func (p *fileParser) grader(raw json.RawMessage, path string) (Grader, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := event.UnmarshalExact(raw, &head); err != nil {
		return nil, p.fail(path, "is not a JSON object with a string \"type\"", `write {"type": "exact"} (or regex, jsonSchema, llmJudge)`)
	}
	members, ok := graderMembers[head.Type]
	if head.Type == "" {
		return nil, p.fail(join(path, "type"), "is missing", "say which grader: exact, regex, jsonSchema or llmJudge")
	}
	if !ok {
		return nil, p.fail(join(path, "type"), fmt.Sprintf("is %q, not a grader type", head.Type), "use exact, regex, jsonSchema or llmJudge")
	}
	m, err := p.object(raw, path, members...)
	if err != nil {
		return nil, err
	}
	id, err := p.str(m, path, "id", false)
	if err != nil {
		return nil, err
	}
	ptr, err := p.str(m, path, "path", false)
	if err != nil {
		return nil, err
	}
	if ptr != "" && !strings.HasPrefix(ptr, "/") {
		return nil, p.fail(join(path, "path"), "is not a JSON Pointer", `start it with / ("/plan/variant"), or leave it out to grade the whole output`)
	}
	switch head.Type {
	case "exact":
		return Exact{ID: id, Path: ptr}, nil
	case "regex":
		pattern, err := p.str(m, path, "pattern", true)
		if err != nil {
			return nil, err
		}
		if _, err := regexp.Compile(pattern); err != nil {
			return nil, p.fail(join(path, "pattern"), "is not a regular expression: "+err.Error(), "write it in Go's RE2 syntax")
		}
		return Regex{ID: id, Path: ptr, Pattern: pattern}, nil
	case "jsonSchema":
		src, ok := m["schema"]
		if !ok {
			return nil, p.fail(join(path, "schema"), "is missing", "give the JSON Schema inline")
		}
		if _, err := schema.Compile(string(src)); err != nil {
			return nil, p.fail(join(path, "schema"), "is not a usable JSON Schema: "+err.Error(), "fix the schema (external $refs are refused)")
		}
		return JSONSchema{ID: id, Path: ptr, Schema: src}, nil
	}
	return p.judge(m, path, id, ptr)
}

func (p *fileParser) judge(m map[string]json.RawMessage, path, id, ptr string) (Grader, error) {
	g := LLMJudge{ID: id, Path: ptr}
	var err error
	if g.Model, err = p.str(m, path, "model", true); err != nil {
		return nil, err
	}
	if g.Rubric, err = p.str(m, path, "rubric", true); err != nil {
		return nil, err
	}
	if g.PassScore, err = p.number(m, path, "passScore", 0, 1); err != nil {
		return nil, err
	}
	tokens, err := p.number(m, path, "maxTokens", 0, 1<<20)
	if err != nil {
		return nil, err
	}
	g.MaxTokens = int(tokens)
	provider, err := p.str(m, path, "provider", false)
	if err != nil {
		return nil, err
	}
	cassette, err := p.str(m, path, "cassette", false)
	if err != nil {
		return nil, err
	}
	switch {
	case (provider == "") == (cassette == ""):
		return nil, p.fail(path, "names no model provider, or two", `give exactly one of "provider" (a provider the app registers) and "cassette" (a recorded cassette file)`)
	case provider != "":
		pr, ok := p.opts.Providers[provider]
		if !ok {
			return nil, p.fail(join(path, "provider"), fmt.Sprintf("is %q, which the app does not register", provider), "use one of: "+providerNames(p.opts.Providers))
		}
		g.Provider = pr
	default:
		c, err := llm.OpenCassette(p.resolve(cassette), llm.CassetteOptions{Mode: llm.Replay})
		if err != nil {
			return nil, p.fail(join(path, "cassette"), err.Error(), "give the path of a recorded cassette, relative to the suite file")
		}
		g.Provider = c
	}
	return g, nil
}

// providerNames lists the registered providers' names, sorted.
func providerNames(ps map[string]llm.Provider) string {
	names := make([]string, 0, len(ps))
	for n := range ps { //loom:sorted below
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "(none: the app registers no providers, so use \"cassette\")"
	}
	return strings.Join(names, ", ")
}

func (p *fileParser) thresholds(raw json.RawMessage) (Thresholds, error) {
	m, err := p.object(raw, "thresholds", "passRateDrop", "meanScoreDrop", "scoreDrop", "costIncrease")
	if err != nil {
		return Thresholds{}, err
	}
	var t Thresholds
	for _, f := range []struct {
		key string
		dst *float64
		hi  float64
	}{{"passRateDrop", &t.PassRateDrop, 1}, {"meanScoreDrop", &t.MeanScoreDrop, 1}, {"scoreDrop", &t.ScoreDrop, 1}, {"costIncrease", &t.CostIncrease, 1e6}} {
		if *f.dst, err = p.number(m, "thresholds", f.key, -1, f.hi); err != nil {
			return Thresholds{}, err
		}
	}
	return t, nil
}
