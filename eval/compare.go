package eval

import (
	"fmt"
	"math"
	"strings"

	"github.com/loom-kernel/loom/event"
)

// Thresholds say how much worse a candidate may be than its baseline
// before Compare calls it a regression. The zero value is strict: any
// drop, any cost increase, any case that stops passing is a regression. A
// negative threshold turns its check off.
type Thresholds struct {
	// PassRateDrop is the largest drop of a grader's pass rate (0..1,
	// absolute: 0.1 lets 90% follow 100%) that is not a regression.
	PassRateDrop float64 `json:"passRateDrop"`
	// MeanScoreDrop is the largest drop of a grader's mean score (0..1).
	MeanScoreDrop float64 `json:"meanScoreDrop"`
	// ScoreDrop is the largest drop of one case's score under one grader.
	// A case that passed and now fails is a regression whatever its score.
	ScoreDrop float64 `json:"scoreDrop"`
	// CostIncrease is the largest relative rise of the suite's total
	// tokens or US dollars (0.2: 20% more) that is not a regression. A
	// baseline that spent nothing makes any spending a rise past it.
	CostIncrease float64 `json:"costIncrease"`
}

// Regression is one way the candidate is worse than the baseline beyond a
// threshold: Scope is "case", "grader" or "costs", Case and Grader say
// which (empty when not about one), Metric what was measured, and Baseline
// and Candidate its two values.
type Regression struct {
	Scope     string  `json:"scope"`
	Case      string  `json:"case,omitempty"`
	Grader    string  `json:"grader,omitempty"`
	Metric    string  `json:"metric"`
	Baseline  float64 `json:"baseline"`
	Candidate float64 `json:"candidate"`
	Detail    string  `json:"detail"`
}

// Comparison is what Compare found, in a stable order (the baseline's case
// and grader order, then costs). Notes are changes that are not
// regressions: cases or graders only one report has, improvements.
type Comparison struct {
	Baseline    string       `json:"baseline"`
	Candidate   string       `json:"candidate"`
	Regressions []Regression `json:"regressions"`
	Notes       []string     `json:"notes,omitempty"`
	Summary     string       `json:"summary"`
}

// Regressed reports whether the candidate regressed beyond the thresholds.
func (c Comparison) Regressed() bool { return len(c.Regressions) > 0 }

// Compare compares a candidate report with its baseline, case by case and
// grader by grader (matched by name), and flags what got worse beyond t:
// a case that passed a grader and now fails it or is missing, a case score
// that dropped more than ScoreDrop, a grader whose pass rate or mean score
// dropped more than PassRateDrop or MeanScoreDrop or that is missing, and
// total tokens or cost that rose by more than CostIncrease. It reads
// nothing but its arguments.
func Compare(baseline, candidate Report, t Thresholds) Comparison {
	cmp := Comparison{Baseline: baseline.Suite, Candidate: candidate.Suite, Regressions: []Regression{}}
	cmp.compareCases(baseline, candidate, t)
	cmp.compareGraders(baseline, candidate, t)
	cmp.compareCosts(baseline.Costs, candidate.Costs, t)
	cmp.Summary = cmp.summary(baseline, candidate)
	return cmp
}

// dropped reports whether to fell from from by more than limit (a negative
// limit: never).
func dropped(from, to, limit float64) bool { return limit >= 0 && from-to > limit+1e-12 }

func (c *Comparison) flag(r Regression) { c.Regressions = append(c.Regressions, r) }

func (c *Comparison) compareCases(baseline, candidate Report, t Thresholds) {
	cands := map[string]CaseResult{}
	for _, cr := range candidate.Cases {
		cands[cr.Name] = cr
	}
	for _, b := range baseline.Cases {
		cr, ok := cands[b.Name]
		if !ok {
			if b.Passed {
				c.flag(Regression{Scope: "case", Case: b.Name, Metric: "present", Baseline: 1, Candidate: 0,
					Detail: "the case passed in the baseline and is missing from the candidate"})
			} else {
				c.Notes = append(c.Notes, fmt.Sprintf("case %s is missing from the candidate (it did not pass in the baseline)", b.Name))
			}
			continue
		}
		grades := map[string]Grade{}
		for _, g := range cr.Grades {
			grades[g.Grader] = g
		}
		for _, bg := range b.Grades {
			cg, ok := grades[bg.Grader]
			switch {
			case !ok:
				continue // reported once, per grader
			case bg.Pass && !cg.Pass:
				c.flag(Regression{Scope: "case", Case: b.Name, Grader: bg.Grader, Metric: "pass", Baseline: 1, Candidate: 0,
					Detail: strings.TrimSuffix("passed, now fails: "+clip(cg.Reason, 2*maxReasonBytes), ": ")})
			case dropped(bg.Score, cg.Score, t.ScoreDrop):
				c.flag(Regression{Scope: "case", Case: b.Name, Grader: bg.Grader, Metric: "score", Baseline: bg.Score, Candidate: cg.Score,
					Detail: fmt.Sprintf("score dropped by %s (threshold %s)", num(bg.Score-cg.Score), num(t.ScoreDrop))})
			case !bg.Pass && cg.Pass:
				c.Notes = append(c.Notes, fmt.Sprintf("case %s now passes %s", b.Name, bg.Grader))
			}
		}
	}
	known := map[string]bool{}
	for _, b := range baseline.Cases {
		known[b.Name] = true
	}
	for _, cr := range candidate.Cases {
		if !known[cr.Name] {
			c.Notes = append(c.Notes, fmt.Sprintf("case %s is new in the candidate", cr.Name))
		}
	}
}

func (c *Comparison) compareGraders(baseline, candidate Report, t Thresholds) {
	cands := map[string]GraderSummary{}
	for _, g := range candidate.Graders {
		cands[g.Grader] = g
	}
	for _, b := range baseline.Graders {
		g, ok := cands[b.Grader]
		if !ok {
			c.flag(Regression{Scope: "grader", Grader: b.Grader, Metric: "present", Baseline: 1, Candidate: 0,
				Detail: "the grader is missing from the candidate: its cases are no longer judged"})
			continue
		}
		if dropped(b.PassRate, g.PassRate, t.PassRateDrop) {
			c.flag(Regression{Scope: "grader", Grader: b.Grader, Metric: "passRate", Baseline: b.PassRate, Candidate: g.PassRate,
				Detail: fmt.Sprintf("pass rate dropped from %s to %s (threshold %s)", pct(b.PassRate), pct(g.PassRate), pct(t.PassRateDrop))})
		}
		if dropped(b.MeanScore, g.MeanScore, t.MeanScoreDrop) {
			c.flag(Regression{Scope: "grader", Grader: b.Grader, Metric: "meanScore", Baseline: b.MeanScore, Candidate: g.MeanScore,
				Detail: fmt.Sprintf("mean score dropped from %s to %s (threshold %s)", num(b.MeanScore), num(g.MeanScore), num(t.MeanScoreDrop))})
		}
	}
}

func (c *Comparison) compareCosts(b, k Costs, t Thresholds) {
	for _, m := range []struct {
		name     string
		from, to float64
	}{{"tokens", b.Tokens, k.Tokens}, {"costUsd", b.CostUSD, k.CostUSD}} {
		if t.CostIncrease < 0 || m.to <= m.from {
			continue
		}
		if m.from == 0 || (m.to-m.from)/m.from > t.CostIncrease+1e-12 {
			detail := fmt.Sprintf("%s rose from %s to %s", m.name, num(m.from), num(m.to))
			if m.from > 0 {
				detail += fmt.Sprintf(" (+%s, threshold %s)", pct((m.to-m.from)/m.from), pct(t.CostIncrease))
			}
			c.flag(Regression{Scope: "costs", Metric: m.name, Baseline: m.from, Candidate: m.to, Detail: detail})
		}
	}
}

func (c *Comparison) summary(baseline, candidate Report) string {
	passed := func(r Report) int {
		n := 0
		for _, cr := range r.Cases {
			if cr.Passed {
				n++
			}
		}
		return n
	}
	verdict := "no regression"
	if c.Regressed() {
		verdict = fmt.Sprintf("%d regression(s)", len(c.Regressions))
	}
	return fmt.Sprintf("%s: %d/%d cases passed in the baseline, %d/%d in the candidate", verdict,
		passed(baseline), len(baseline.Cases), passed(candidate), len(candidate.Cases))
}

// String renders the comparison for people: the summary, then one line
// per regression and note.
func (c Comparison) String() string {
	var b strings.Builder
	b.WriteString(c.Summary + "\n")
	for _, r := range c.Regressions {
		b.WriteString("  REGRESSION " + r.where() + ": " + r.Detail + "\n")
	}
	for _, n := range c.Notes {
		b.WriteString("  note: " + n + "\n")
	}
	return b.String()
}

// where names what a regression is about.
func (r Regression) where() string {
	parts := []string{r.Scope}
	if r.Case != "" {
		parts = append(parts, r.Case)
	}
	if r.Grader != "" {
		parts = append(parts, r.Grader)
	}
	return strings.Join(parts, " ")
}

// num renders a number as JavaScript would (rounded to 6 decimals), pct a
// fraction as a percentage.
func num(f float64) string {
	if math.Abs(f) > 1e12 || math.IsNaN(f) || math.IsInf(f, 0) {
		return event.FormatJSNumber(f)
	}
	return event.FormatJSNumber(float64(int64(f*1e6+signOf(f)*0.5)) / 1e6)
}

func pct(f float64) string { return num(f*100) + "%" }

func signOf(f float64) float64 {
	if f < 0 {
		return -1
	}
	return 1
}
