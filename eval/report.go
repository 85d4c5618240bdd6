package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// JSON is the report as the report.json file holds it: indented, HTML
// characters unescaped, ending in a newline. ReadReport reads it back.
func (r Report) JSON() []byte { return indentJSON(r) }

// JSON is the comparison as comparison.json holds it.
func (c Comparison) JSON() []byte { return indentJSON(c) }

// JSON is the diff as indented JSON.
func (d Diff) JSON() []byte { return indentJSON(d) }

func indentJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		panic("eval: encoding a report: " + err.Error()) // plain data: it encodes
	}
	return buf.Bytes()
}

// ReadReport reads a report.json file (a baseline).
func ReadReport(path string) (Report, error) {
	data, err := readBounded(path)
	if err != nil {
		return Report{}, fmt.Errorf("eval: report %s: %w", path, err)
	}
	var r Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("eval: report %s is not a report.json: %w", path, err)
	}
	if r.Suite == "" {
		return Report{}, fmt.Errorf("eval: report %s names no suite: is it a report.json eval wrote?", path)
	}
	return r, nil
}

// Markdown renders the report for people (report.md): the verdict, a
// table of graders, a table of cases with each grade, and the reasons of
// every failing grade. With a non-nil comparison it ends with the
// regressions found against the baseline.
func (r Report) Markdown(cmp *Comparison) []byte {
	var b strings.Builder
	verdict := "PASSED"
	if !r.Passed {
		verdict = "FAILED"
	}
	passed := 0
	for _, c := range r.Cases {
		if c.Passed {
			passed++
		}
	}
	fmt.Fprintf(&b, "# Eval report: %s\n\n", mdText(r.Suite))
	fmt.Fprintf(&b, "**%s**: %d of %d cases passed. Flow `%s`.\n\n", verdict, passed, len(r.Cases), r.Flow)
	fmt.Fprintf(&b, "Cost: %d model calls, %s tokens, $%s (judges: %d calls, %s tokens, $%s).\n\n",
		r.Costs.ModelCalls, num(r.Costs.Tokens), num(r.Costs.CostUSD), r.JudgeCosts.ModelCalls, num(r.JudgeCosts.Tokens), num(r.JudgeCosts.CostUSD))
	b.WriteString("## Graders\n\n| grader | passed | pass rate | mean score |\n|---|---|---|---|\n")
	for _, g := range r.Graders {
		fmt.Fprintf(&b, "| %s | %d/%d | %s | %s |\n", mdText(g.Grader), g.Passed, g.Cases, pct(g.PassRate), num(g.MeanScore))
	}
	b.WriteString("\n## Cases\n\n| case | status | passed |")
	for _, g := range r.Graders {
		b.WriteString(" " + mdText(g.Grader) + " |")
	}
	b.WriteString(" tokens | cost (USD) |\n|---|---|---|" + strings.Repeat("---|", len(r.Graders)+2) + "\n")
	for _, c := range r.Cases {
		fmt.Fprintf(&b, "| %s | %s | %s |", mdText(c.Name), c.Status, yesNo(c.Passed))
		for _, g := range c.Grades {
			mark := "fail"
			if g.Pass {
				mark = "pass"
			}
			fmt.Fprintf(&b, " %s %s |", mark, num(g.Score))
		}
		fmt.Fprintf(&b, " %s | %s |\n", num(c.Costs.Tokens), num(c.Costs.CostUSD))
	}
	var failures []string
	for _, c := range r.Cases {
		if c.Error != "" {
			failures = append(failures, fmt.Sprintf("- **%s**: %s", mdText(c.Name), mdText(c.Error)))
		}
		for _, g := range c.Grades {
			if !g.Pass {
				failures = append(failures, fmt.Sprintf("- **%s** / %s: %s", mdText(c.Name), mdText(g.Grader), mdText(g.Reason)))
			}
		}
	}
	if len(failures) > 0 {
		b.WriteString("\n## Failures\n\n" + strings.Join(failures, "\n") + "\n")
	}
	if cmp != nil {
		b.WriteString("\n## Against the baseline\n\n" + mdText(cmp.Summary) + ".\n")
		for _, rg := range cmp.Regressions {
			fmt.Fprintf(&b, "\n- **regression** (%s): %s", mdText(rg.where()), mdText(rg.Detail))
		}
		for _, n := range cmp.Notes {
			fmt.Fprintf(&b, "\n- note: %s", mdText(n))
		}
		if len(cmp.Regressions)+len(cmp.Notes) > 0 {
			b.WriteString("\n")
		}
	}
	return []byte(b.String())
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// mdText keeps a value from breaking a Markdown table or line.
func mdText(s string) string {
	return strings.NewReplacer("|", `\|`, "\r", " ", "\n", " ").Replace(s)
}

// WriteReport writes report.json and report.md into dir (created if
// missing), and with a comparison also comparison.json; each file is
// written to a temporary name and renamed, so a reader never sees half a
// report. It returns the paths written.
func WriteReport(dir string, r Report, cmp *Comparison) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("eval: report directory: %w", err)
	}
	files := []struct {
		name string
		data []byte
	}{{"report.json", r.JSON()}, {"report.md", r.Markdown(cmp)}}
	if cmp != nil {
		files = append(files, struct {
			name string
			data []byte
		}{"comparison.json", cmp.JSON()})
	}
	var written []string
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := writeAtomic(path, f.data); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("eval: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("eval: writing %s: %w", path, err)
	}
	return nil
}
