package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
)

// table writes aligned columns for people.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }

// progress shows how far a long operation is, on stderr, only when stderr
// is a terminal (or --progress=always); it never writes to stdout.
type progress struct {
	w    io.Writer
	on   bool
	last time.Time
	used bool
}

func (c *cli) newProgress() *progress {
	on := c.progress == "always" || (c.progress == "auto" && c.stderrTTY)
	return &progress{w: c.stderr, on: on}
}

// update redraws the progress line, at most ten times a second.
func (p *progress) update(format string, args ...any) {
	if !p.on || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.used = true
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
}

// done clears the progress line.
func (p *progress) done() {
	if p.on && p.used {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// stamp renders epoch milliseconds as UTC RFC 3339 with milliseconds.
func stamp(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// short renders JSON on one line, cut to at most n runes.
func short(raw json.RawMessage, n int) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	s := b.String()
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// describe says in a few words what an event recorded.
func describe(e event.Envelope) string {
	var p struct {
		StepID     string          `json:"stepId"`
		Output     json.RawMessage `json:"output"`
		Error      json.RawMessage `json:"error"`
		Channel    string          `json:"channel"`
		Payload    json.RawMessage `json:"payload"`
		DecisionID string          `json:"decisionId"`
		Choice     json.RawMessage `json:"choice"`
		On         string          `json:"on"`
		EventType  string          `json:"eventType"`
		Principal  json.RawMessage `json:"principal"`
		Gate       string          `json:"gate"`
		Parent     string          `json:"parent"`
		At         *int64          `json:"at"`
		Input      json.RawMessage `json:"input"`
		Reason     string          `json:"reason"`
	}
	if json.Unmarshal(e.Payload, &p) != nil {
		return short(e.Payload, 100)
	}
	switch e.Type {
	case event.StepStarted, event.StepRetrying, event.StepCancelled:
		return p.StepID
	case event.StepCompleted:
		return p.StepID + " → " + short(p.Output, 80)
	case event.StepFailed:
		if p.Channel != "" {
			return p.StepID + " failed on channel " + p.Channel + ": " + short(p.Payload, 60)
		}
		return p.StepID + " failed: " + short(p.Error, 60)
	case event.DecisionRecorded:
		return p.DecisionID + " = " + short(p.Choice, 80)
	case event.ExecutionSuspended:
		return "parked on " + p.On
	case event.ExecutionResumed:
		return p.EventType + " " + short(p.Payload, 80)
	case event.ApprovalGranted:
		return short(p.Principal, 60) + " for " + p.Gate
	case event.ExecutionStarted:
		return "input " + short(p.Input, 80)
	case event.ExecutionCompleted:
		return "output " + short(p.Output, 80)
	case event.ExecutionFailed:
		return short(p.Error, 100)
	case event.ExecutionCancelled:
		return p.Reason
	case "__loom_fork__":
		if p.At != nil {
			return fmt.Sprintf("fork of %s at #%d", p.Parent, *p.At)
		}
	}
	return short(e.Payload, 100)
}

// marks lists an event's metadata flags, e.g. " [kernel, simulate]".
func marks(e event.Envelope) string {
	var m []string
	for _, k := range []string{"kernel", "simulate"} {
		if string(e.Metadata[k]) == "true" {
			m = append(m, k)
		}
	}
	if _, ok := e.FlowEmit(); ok {
		m = append(m, "flowEmit")
	}
	if len(m) == 0 {
		return ""
	}
	return " [" + strings.Join(m, ", ") + "]"
}
