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

// waiting shows, from now until stop is called, what the command waits
// for (a call to the app, a write to the store) and how long it has
// waited, redrawn every second; stop clears the line. Off (and free) when
// progress is off.
func (p *progress) waiting(format string, args ...any) (stop func()) {
	if !p.on {
		return func() {}
	}
	what, since := fmt.Sprintf(format, args...), time.Now()
	draw := func() { fmt.Fprintf(p.w, "\r\033[K%s (%s)", what, time.Since(since).Round(time.Second)) }
	p.used = true
	draw()
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				draw()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-ended
		p.done()
	}
}

// wait runs call, showing what it waits for on stderr meanwhile.
func (c *cli) wait(call func() error, format string, args ...any) error {
	stop := c.newProgress().waiting(format, args...)
	defer stop()
	return call()
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
		Attempt    *int64          `json:"attempt"`
		DelayMs    *int64          `json:"delayMs"`
	}
	if json.Unmarshal(e.Payload, &p) != nil {
		return short(e.Payload, 100)
	}
	switch e.Type {
	case event.StepRetrying:
		return describeRetry(p.StepID, p.Attempt, p.DelayMs, p.Error)
	case event.StepStarted, event.StepCancelled:
		return p.StepID
	case event.StepCompleted:
		return p.StepID + " → " + short(p.Output, 80)
	case event.StepFailed:
		if p.Channel != "" {
			return p.StepID + " failed on channel " + p.Channel + ": " + short(p.Payload, 60)
		}
		return p.StepID + " failed: " + short(p.Error, 60)
	case event.DecisionRecorded:
		if step, attempt, ok := verdictOf(p.DecisionID); ok {
			return "operator's verdict on " + step + " attempt " + attempt + ": " + short(p.Choice, 80)
		}
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

// describeRetry says what a STEP_RETRYING recorded: the attempt about to
// run, after what delay, and the error of the one that failed.
func describeRetry(step string, attempt, delayMs *int64, errJSON json.RawMessage) string {
	s := step + ":"
	if attempt != nil {
		s += fmt.Sprintf(" attempt %d", *attempt)
	} else {
		s += " another attempt"
	}
	if delayMs != nil {
		s += " in " + (time.Duration(*delayMs) * time.Millisecond).String()
	}
	var e struct {
		Message string `json:"message"`
	}
	msg := short(errJSON, 80)
	if json.Unmarshal(errJSON, &e) == nil && e.Message != "" {
		msg = short(mustJSONString(e.Message), 80)
	}
	if msg != "" {
		s += ", after: " + msg
	}
	return s
}

// mustJSONString renders s as a JSON string (so control characters in an
// error stay on one line).
func mustJSONString(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}

// The kernel's reserved decision ids: its own implicit decisions
// (__loom_now#n, __loom_random#n, __loom_select#n…) and an operator's
// in-doubt verdict (__loom_verdict:<step>#<attempt>), which is shown.
const (
	reservedPrefix = "__loom_"
	verdictPrefix  = "__loom_verdict:"
)

// kernelDecision reports an event that records one of the kernel's own
// decisions — noise to a reader, left out of logs and state unless
// --internal. An operator's verdict is not one of them.
func kernelDecision(e event.Envelope) bool {
	if e.Type != event.DecisionRecorded {
		return false
	}
	var p struct {
		DecisionID string `json:"decisionId"`
	}
	return json.Unmarshal(e.Payload, &p) == nil && internalDecisionID(p.DecisionID)
}

func internalDecisionID(id string) bool {
	return strings.HasPrefix(id, reservedPrefix) && !strings.HasPrefix(id, verdictPrefix)
}

// verdictOf splits an in-doubt verdict's decision id into step and attempt.
func verdictOf(id string) (step, attempt string, ok bool) {
	rest, ok := strings.CutPrefix(id, verdictPrefix)
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '#')
	if i < 0 {
		return rest, "?", true
	}
	return rest[:i], rest[i+1:], true
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
