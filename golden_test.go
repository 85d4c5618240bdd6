package loom_test

// Golden histories (STYLE rule 12). testdata/histories holds recorded logs of
// flows, one file each (format in testdata/histories/README.md). A good
// history must replay byte for byte under today's code: a fresh runtime
// drives the scenario its log records and must write the same log, and a
// fresh process handed the recorded prefix at every park (or crash point)
// must write the same rest. A bad history (bad-*.json) is a log recorded
// under an older version of its flow: today's code must park it or refuse
// it with the typed error its case names, appending nothing else.
//
// The harness here is the kernel's; examples/incident/golden_test.go keeps
// a copy for the example app, which is package main and cannot import it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

var updateHistories = flag.Bool("update-histories", false,
	"rewrite testdata/histories from today's code; only legitimate when the change to the logs is intended")

const (
	historyDir    = "testdata/histories"
	historyFormat = "loom-golden-history/1"
	// goldenEpoch is the clock at every recorded start: 2026-01-01T00:00:00Z.
	goldenEpoch int64 = 1_767_225_600_000
	// goldenTick is how far the recording clock moves between two caller
	// actions (a timer fires at its wakeAt instead).
	goldenTick int64 = 60_000
	// verdictPrefix starts the kernel decision id of an in-doubt verdict.
	verdictPrefix = "__loom_verdict:"
)

// historyFile is one file of testdata/histories.
type historyFile struct {
	Format      string            `json:"format"`
	Name        string            `json:"name"`
	Flow        string            `json:"flow"`
	Description string            `json:"description"`
	Events      []json.RawMessage `json:"events"`
}

// encodeHistory renders h in the one form the files are kept in: the
// header fields, then one canonical envelope per line.
func encodeHistory(h historyFile) []byte {
	str := func(s string) string { return string(event.MustCanonical(mustJSON(s))) }
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"format\": %s,\n  \"name\": %s,\n  \"flow\": %s,\n  \"description\": %s,\n  \"events\": [\n",
		str(h.Format), str(h.Name), str(h.Flow), str(h.Description))
	for i, e := range h.Events {
		b.WriteString("    ")
		b.Write(e)
		if i < len(h.Events)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes()
}

// canonicalEnvelope is an envelope as the store holds it (event.Encode),
// in canonical JSON: what the histories compare byte for byte.
func canonicalEnvelope(e event.Envelope) ([]byte, error) {
	b, err := event.Encode(e)
	if err != nil {
		return nil, err
	}
	return event.Canonical(b)
}

// loadedHistory is a history file read back, checked and understood.
type loadedHistory struct {
	file    historyFile
	raw     [][]byte // the canonical envelopes, as in the file
	envs    []event.Envelope
	id      string   // the execution id
	actions []action // the scenario, derived from the log
}

// loadHistory reads testdata/histories/<name>.json. It refuses a file not in
// the writer's exact form, an envelope that is not canonical or does not
// decode exactly (event.Decode), a log that is not one execution of the
// named flow with contiguous sequences, and a log whose caller actions
// cannot be derived.
func loadHistory(t *testing.T, name string) *loadedHistory {
	t.Helper()
	path := filepath.Join(historyDir, name+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with: go test . -run Golden -update-histories)", err)
	}
	var f historyFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if f.Format != historyFormat || f.Name != name {
		t.Fatalf("%s: format %q name %q, want %q and %q", path, f.Format, f.Name, historyFormat, name)
	}
	if !bytes.Equal(encodeHistory(f), data) {
		t.Fatalf("%s is not in the form the recorder writes (edited by hand?); regenerate it", path)
	}
	h := &loadedHistory{file: f}
	for i, raw := range f.Events {
		e, err := event.Decode(raw, event.Limits{})
		if err != nil {
			t.Fatalf("%s: event %d: %v", path, i, err)
		}
		c, err := canonicalEnvelope(e)
		if err != nil || !bytes.Equal(c, raw) {
			t.Fatalf("%s: event %d is not a canonical envelope (%v):\n%s\n%s", path, i, err, raw, c)
		}
		if e.Sequence != int64(i) || e.WorkflowID != f.Flow || (i > 0 && e.ExecutionID != h.id) {
			t.Fatalf("%s: event %d (sequence %d, flow %q, execution %q) is not the next event of one execution of %s",
				path, i, e.Sequence, e.WorkflowID, e.ExecutionID, f.Flow)
		}
		h.id = e.ExecutionID
		h.raw = append(h.raw, raw)
		h.envs = append(h.envs, e)
	}
	if h.actions, err = deriveActions(h.envs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return h
}

// writeHistory records a history file. A file the new recording matches
// (up to a Parallel block's interleaving, see diffLogs) is left as it is,
// so regenerating without a change to the log changes no file.
func writeHistory(t *testing.T, name, flowID, description string, log []event.Envelope) {
	t.Helper()
	f := historyFile{Format: historyFormat, Name: name, Flow: flowID, Description: description}
	for _, e := range log {
		c, err := canonicalEnvelope(e)
		if err != nil {
			t.Fatal(err)
		}
		f.Events = append(f.Events, c)
	}
	path := filepath.Join(historyDir, name+".json")
	var old historyFile
	if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &old) == nil &&
		old.Format == f.Format && old.Flow == f.Flow && old.Description == f.Description {
		raw := make([][]byte, len(old.Events))
		for i, e := range old.Events {
			raw[i] = e
		}
		if msg, _ := diffLogs(raw, log); msg == "" {
			return
		}
	}
	if err := os.MkdirAll(historyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, encodeHistory(f), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// claimHistories fails on a file of testdata/histories no case replays
// (among those owned: names with the prefix, or without it when negate).
func claimHistories(t *testing.T, names []string, prefix string, negate bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(historyDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if strings.HasPrefix(name, prefix) != negate && !slices.Contains(names, name) {
			t.Errorf("%s is replayed by no case: add its case or remove the file", f)
		}
	}
}

// actionKind is what a caller (or the kernel's poller) did to the execution.
type actionKind string

const (
	actStart   actionKind = "start"   // Start(flow, input, WithExecutionID)
	actResume  actionKind = "resume"  // Resume(eventType, payload): a gate answer
	actTimer   actionKind = "timer"   // the due park timer fires (FireDueTimers at its wakeAt)
	actRecover actionKind = "recover" // a new process's Recover re-drives what a crash left running
	actVerdict actionKind = "verdict" // ResolveInDoubt: an operator's verdict on an in-doubt step
)

// action is one external input of a scenario. Derived from a log, every
// field is filled; in a recording script, at and wakeAt are computed.
type action struct {
	kind      actionKind
	at        int64 // the clock during the action and its drive: its first event's timestamp
	seq       int64 // the sequence of its first event
	input     json.RawMessage
	eventType string
	payload   json.RawMessage
	wakeAt    int64
	verdict   loom.Verdict
	// crash names the step whose effect was running when the process died
	// during the drive this action began: the next action is a recover.
	crash string
}

func (a action) String() string {
	s := string(a.kind)
	switch a.kind {
	case actStart:
		s += " " + string(a.input)
	case actResume:
		s += " " + a.eventType + " " + string(a.payload)
	case actTimer:
		s += " wakeAt " + strconv.FormatInt(a.wakeAt, 10)
	case actVerdict:
		s += fmt.Sprintf(" %s#%d done=%v %s", a.verdict.StepID, a.verdict.Attempt, a.verdict.Done, a.verdict.Output)
	}
	if a.crash != "" {
		s += " (the process dies during step " + a.crash + ")"
	}
	return s
}

// deriveActions reads a log's external inputs back from it:
//   - EXECUTION_STARTED (sequence 0) is the start: input, execution id, time;
//   - TIMER_FIRED with its EXECUTION_RESUMED is a timer firing at wakeAt;
//   - a kernel DECISION_RECORDED __loom_verdict:<step>#<attempt> with its
//     null EXECUTION_RESUMED is an operator's verdict;
//   - EXECUTION_RECOVERED is a recovery after a crash, and the step started
//     without an outcome before it is where the previous drive died;
//   - any other EXECUTION_RESUMED is a gate answer.
//
// Every other event is the flow's or the kernel's own doing; caller inputs
// the harness cannot replay (an authenticator's approval, a migration, a
// cancel, a fork) are refused.
func deriveActions(evs []event.Envelope) ([]action, error) {
	if len(evs) == 0 || evs[0].Type != event.ExecutionStarted {
		return nil, errors.New("the log does not begin with EXECUTION_STARTED")
	}
	var started struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(evs[0].Payload, &started); err != nil {
		return nil, err
	}
	acts := []action{{kind: actStart, at: evs[0].Timestamp, input: started.Input}}
	open := map[string]bool{} // steps started without an outcome yet
	for i := 1; i < len(evs); i++ {
		e := evs[i]
		var p struct {
			StepID     string          `json:"stepId"`
			EventType  string          `json:"eventType"`
			Payload    json.RawMessage `json:"payload"`
			WakeAt     int64           `json:"wakeAt"`
			DecisionID string          `json:"decisionId"`
			Choice     json.RawMessage `json:"choice"`
		}
		_ = json.Unmarshal(e.PayloadOrNull(), &p) // an application event's payload may be anything
		resumedBy := func(eventType string) error {
			if i+1 >= len(evs) || evs[i+1].Type != event.ExecutionResumed {
				return fmt.Errorf("event %d (%s) is not followed by its EXECUTION_RESUMED", i, e.Type)
			}
			var r struct {
				EventType string `json:"eventType"`
			}
			_ = json.Unmarshal(evs[i+1].PayloadOrNull(), &r)
			if r.EventType != eventType {
				return fmt.Errorf("event %d resumes %q, want %q", i+1, r.EventType, eventType)
			}
			i++
			return nil
		}
		a := action{at: e.Timestamp, seq: e.Sequence}
		switch e.Type {
		case event.StepStarted:
			open[p.StepID] = true
			continue
		case event.StepCompleted, event.StepFailed:
			delete(open, p.StepID)
			continue
		case event.ExecutionRecovered:
			if len(open) != 1 {
				return nil, fmt.Errorf("event %d: a recovery with %d steps open; the harness replays a crash inside one step's effect", i, len(open))
			}
			for step := range open { //loom:order-independent exactly one
				acts[len(acts)-1].crash = step
			}
			a.kind = actRecover
		case event.TimerFired:
			if err := resumedBy(event.TimerFired); err != nil {
				return nil, err
			}
			a.kind, a.wakeAt = actTimer, p.WakeAt
		case event.DecisionRecorded:
			if !e.Kernel() {
				continue // the flow's: ctx.Decide, loom.Now and the like
			}
			if !strings.HasPrefix(p.DecisionID, verdictPrefix) {
				return nil, fmt.Errorf("event %d: kernel decision %q is a caller input the harness does not replay", i, p.DecisionID)
			}
			step, n, ok := strings.Cut(strings.TrimPrefix(p.DecisionID, verdictPrefix), "#")
			attempt, err := strconv.ParseInt(n, 10, 64)
			var v struct {
				Verdict string          `json:"verdict"`
				Output  json.RawMessage `json:"output"`
			}
			if !ok || err != nil || json.Unmarshal(p.Choice, &v) != nil {
				return nil, fmt.Errorf("event %d: unreadable verdict %q", i, p.DecisionID)
			}
			if err := resumedBy(""); err != nil {
				return nil, err
			}
			a.kind = actVerdict
			a.verdict = loom.Verdict{StepID: step, Attempt: attempt, Done: v.Verdict == "done", Output: v.Output}
		case event.ExecutionResumed:
			a.kind, a.eventType, a.payload = actResume, p.EventType, p.Payload
		case event.ApprovalGranted, event.ExecutionMigrated, event.ExecutionCancelled, event.ExecutionDenied, loom.ForkMarker:
			return nil, fmt.Errorf("event %d: %s is a caller input the harness does not replay", i, e.Type)
		default:
			continue
		}
		acts = append(acts, a)
	}
	return acts, nil
}

// sameActions says whether a log's derived actions are the script's.
func sameActions(derived, script []action) error {
	canon := func(raw json.RawMessage) string {
		if len(raw) == 0 {
			return "null"
		}
		return string(event.MustCanonical(raw))
	}
	if len(derived) != len(script) {
		return fmt.Errorf("the log holds %d caller actions, the script %d", len(derived), len(script))
	}
	for i, d := range derived {
		s := script[i]
		if d.kind != s.kind || d.crash != s.crash || d.eventType != s.eventType ||
			canon(d.input) != canon(s.input) || canon(d.payload) != canon(s.payload) ||
			d.verdict.StepID != s.verdict.StepID || d.verdict.Attempt != s.verdict.Attempt ||
			d.verdict.Done != s.verdict.Done || canon(d.verdict.Output) != canon(s.verdict.Output) {
			return fmt.Errorf("action %d: the log has %v, the script %v", i, d, s)
		}
	}
	return nil
}

// goldenClock is the injected clock: it stands still while a drive runs and
// moves only to the instant of each action, so a log's timestamps depend
// on the scenario, never on how often the kernel reads the clock.
type goldenClock struct {
	mu sync.Mutex
	ms int64
}

func (c *goldenClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.UnixMilli(c.ms).UTC()
}

func (c *goldenClock) set(ms int64) {
	c.mu.Lock()
	c.ms = ms
	c.mu.Unlock()
}

// goldenIDs mints the envelope ids ev-0001, ev-0002… Each process (each
// Runtime) continues from the last id in the log it opens on, so the ids a
// process writes are decided by the log alone.
type goldenIDs struct {
	mu sync.Mutex
	n  int
}

func idsAfter(last string) (*goldenIDs, error) {
	if last == "" {
		return &goldenIDs{}, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(last, "ev-"))
	if err != nil || !strings.HasPrefix(last, "ev-") {
		return nil, fmt.Errorf("event id %q was not minted by the golden id generator", last)
	}
	return &goldenIDs{n: n}, nil
}

func (g *goldenIDs) next() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	return fmt.Sprintf("ev-%04d", g.n)
}

// goldenWorld is the durable world of one replay: the stores every process
// of the scenario shares, the clock, and the process (Runtime) running now.
type goldenWorld struct {
	t      *testing.T
	ctx    context.Context
	flow   func(*flowEnv) *loom.Flow
	config func(*loom.Config)
	env    *flowEnv
	id     string
	events *memstore.EventStore
	snaps  *memstore.SnapshotStore
	timers *memstore.TimerStore
	clock  *goldenClock
	rt     *loom.Runtime
}

// newWorld opens a world on fresh stores holding prefix, and a first process.
func newWorld(t *testing.T, flow func(*flowEnv) *loom.Flow, config func(*loom.Config), id string, prefix []event.Envelope) *goldenWorld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	w := &goldenWorld{t: t, ctx: ctx, flow: flow, config: config, env: newFlowEnv(), id: id,
		events: memstore.NewEventStore(), snaps: memstore.NewSnapshotStore(), timers: memstore.NewTimerStore(),
		clock: &goldenClock{}}
	t.Cleanup(w.close) // a test that fails midway leaves no runtime behind
	if len(prefix) > 0 {
		if err := w.events.Append(ctx, id, 0, prefix); err != nil {
			t.Fatal(err)
		}
		w.clock.set(prefix[len(prefix)-1].Timestamp)
	}
	w.open()
	return w
}

// open starts a process on the world's stores: sticky parks off, so every
// resume re-runs the flow from the top and serves earlier steps from the log.
func (w *goldenWorld) open() {
	w.t.Helper()
	log := w.log()
	last := ""
	if len(log) > 0 {
		last = log[len(log)-1].ID
	}
	ids, err := idsAfter(last)
	if err != nil {
		w.t.Fatal(err)
	}
	cfg := loom.Config{Events: w.events, Snapshots: w.snaps, Timers: w.timers, TimerPoll: -1,
		Flows: []*loom.Flow{w.flow(w.env)}, Clock: w.clock, NewID: ids.next, NodeID: "golden-node", StickyParks: -1}
	if w.config != nil {
		w.config(&cfg)
	}
	if w.rt, err = loom.New(cfg); err != nil {
		w.t.Fatal(err)
	}
}

func (w *goldenWorld) close() {
	if w.rt != nil {
		_ = w.rt.Close() // Close reports nothing but success
		w.rt = nil
	}
}

func (w *goldenWorld) log() []event.Envelope {
	w.t.Helper()
	evs, err := store.Read(w.ctx, w.events, w.id)
	if err != nil {
		w.t.Fatal(err)
	}
	return evs
}

// perform does a at its instant and waits until the drive it began parks or
// ends (or, when the scenario says so, kills the process during it and
// starts another). first says a is the first action of a process handed a
// recorded prefix: the park timer that prefix armed is not in the fresh
// timer store, so a timer action is delivered as the poller delivers it,
// a TIMER_FIRED resume through the ingress gate.
func (w *goldenWorld) perform(a action, first bool) (fold.State, error) {
	w.clock.set(a.at)
	var crashed <-chan struct{}
	if a.crash != "" {
		crashed = w.env.armCrash(a.crash)
	}
	var err error
	switch a.kind {
	case actStart:
		_, err = w.rt.Start(w.ctx, w.flowID(), a.input, loom.WithExecutionID(w.id))
	case actResume:
		err = w.rt.Resume(w.ctx, w.id, loom.ResumeEvent{EventType: a.eventType, Payload: a.payload})
	case actTimer:
		if first {
			err = w.rt.Resume(w.ctx, w.id, loom.ResumeEvent{EventType: event.TimerFired, Payload: mustJSON(map[string]int64{"wakeAt": a.wakeAt})})
			break
		}
		var n int
		if n, err = w.rt.FireDueTimers(w.ctx); err == nil && n != 1 {
			err = fmt.Errorf("FireDueTimers at %d fired %d timers, want the park's one", a.at, n)
		}
	case actRecover:
		var n int
		if n, err = w.rt.Recover(w.ctx); err == nil && n != 1 {
			err = fmt.Errorf("Recover re-drove %d executions, want 1", n)
		}
	case actVerdict:
		err = w.rt.ResolveInDoubt(w.ctx, w.id, a.verdict)
	}
	if err != nil {
		return fold.State{}, err
	}
	if crashed != nil {
		select {
		case <-crashed:
		case <-w.ctx.Done():
			return fold.State{}, fmt.Errorf("step %s never ran, so the process could not die in it", a.crash)
		}
		w.close() // the process dies with the effect running
		w.open()  // and another one starts on the same stores
		return w.rt.LoadState(w.ctx, w.id)
	}
	return w.rt.WaitForSettled(w.ctx, w.id)
}

func (w *goldenWorld) flowID() string { return w.flow(newFlowEnv()).ID }

// finish waits for the last drive to end and closes the process. An
// execution that ended must leave no timer behind: a fired one is deleted,
// one an answer made pointless is dropped.
func (w *goldenWorld) finish() {
	w.t.Helper()
	st, err := w.rt.LoadState(w.ctx, w.id)
	if err != nil {
		w.t.Fatal(err)
	}
	if st.Status.Terminal() {
		var failed *loom.FlowFailedError
		if _, err := w.rt.WaitForCompletion(w.ctx, w.id); err != nil && !errors.As(err, &failed) {
			w.t.Fatal(err)
		}
	}
	w.close()
	if left, err := w.timers.Due(w.ctx, math.MaxInt64, 10); err != nil || (st.Status.Terminal() && len(left) > 0) {
		w.t.Errorf("the execution ended %s and left timers %+v behind (%v)", st.Status, left, err)
	}
}

// recordScript runs a script on a fresh world and returns the log: the
// start at goldenEpoch, every later action goldenTick after the previous
// one, a timer at the wakeAt of the park it fires.
func recordScript(t *testing.T, flow func(*flowEnv) *loom.Flow, config func(*loom.Config), id string, script []action) []event.Envelope {
	t.Helper()
	w := newWorld(t, flow, config, id, nil)
	defer w.close()
	at := goldenEpoch
	var st fold.State
	for i, a := range script {
		switch {
		case i == 0:
		case a.kind == actTimer:
			if st.Variables.SuspendedOn == nil || st.Variables.SuspendedOn.WakeAt == nil {
				t.Fatalf("script action %d fires a timer, but the execution is not parked on one", i)
			}
			at = *st.Variables.SuspendedOn.WakeAt
			a.wakeAt = at
		default:
			at += goldenTick
		}
		a.at = at
		var err error
		if st, err = w.perform(a, false); err != nil {
			t.Fatalf("recording action %d (%v): %v", i, a, err)
		}
	}
	w.finish()
	return w.log()
}

// replayFrom drives h's actions after cut (the index of the last action
// whose events the world starts with; -1 for an empty world) under flow,
// and returns the log and what the flow's effects and deciders did.
func replayFrom(t *testing.T, h *loadedHistory, flow func(*flowEnv) *loom.Flow, config func(*loom.Config), cut int) ([]event.Envelope, *flowEnv) {
	t.Helper()
	var prefix []event.Envelope
	if cut >= 0 {
		prefix = h.envs[:h.actions[cut+1].seq]
	}
	w := newWorld(t, flow, config, h.id, prefix)
	defer w.close()
	for i := cut + 1; i < len(h.actions); i++ {
		if _, err := w.perform(h.actions[i], cut >= 0 && i == cut+1); err != nil {
			t.Fatalf("action %d (%v): %v", i, h.actions[i], err)
		}
	}
	w.finish()
	return w.log(), w.env
}

// logNeutral sets kernel options a log must not depend on: step
// durability, a periodic snapshot after every second event (so resumes fold
// a snapshot and a tail) and, unless the flow re-runs what a sticky park
// answers in place, sticky parks (answers reach the parked run in memory).
func logNeutral(config func(*loom.Config), sticky bool) func(*loom.Config) {
	return func(c *loom.Config) {
		if config != nil {
			config(c)
		}
		c.Durability, c.SnapshotEvery = loom.StepDurable, 2
		if sticky {
			c.StickyParks = 0
		}
	}
}

// checkReplay is a good history's contract: a fresh runtime reproduces it,
// so does one under the log-neutral options, and so does a new process
// handed the recorded prefix at every park or crash point.
func checkReplay(t *testing.T, h *loadedHistory, flow func(*flowEnv) *loom.Flow, config, neutral func(*loom.Config)) {
	t.Helper()
	type run struct {
		mode   string
		config func(*loom.Config)
		cut    int // replayFrom's
	}
	runs := []run{{"a fresh runtime driving the whole scenario", config, -1},
		{"a fresh runtime under the log-neutral options", neutral, -1}}
	for cut := 0; cut < len(h.actions)-1; cut++ {
		runs = append(runs, run{fmt.Sprintf("a new process handed the recorded prefix #0–#%d", h.actions[cut+1].seq-1), config, cut})
	}
	for _, r := range runs {
		mode, from := r.mode, int64(0)
		if r.cut >= 0 {
			from = h.actions[r.cut+1].seq
		}
		log, env := replayFrom(t, h, flow, r.config, r.cut)
		msg, reordered := diffLogs(h.raw, log)
		if msg != "" {
			t.Fatalf("%s: %s did not reproduce the history:\n%s", h.file.Name, mode, msg)
		}
		if reordered > 0 {
			t.Logf("%s: %s: %d Parallel block(s) recorded in another interleaving", h.file.Name, mode, reordered)
		}
		checkEffects(t, mode, h.envs, from, env)
	}
}

// diffLogs compares a replayed log with a recorded one, envelope by
// envelope in canonical JSON, and describes the first difference ("" when
// there is none). One relaxation, because Parallel branches run as
// goroutines: within a run of consecutive branch events (a STEP_STARTED
// with a branch, and that step's later STEP_RETRYING, STEP_COMPLETED and
// STEP_FAILED), the events may come in another order, as long as every
// position keeps its id, sequence and timestamp and the run holds the same
// events (type, payload, metadata) byte for byte.
//
// It also counts the blocks that matched only in another interleaving.
func diffLogs(recorded [][]byte, replayed []event.Envelope) (string, int) {
	reordered := 0
	got := make([][]byte, len(replayed))
	for i, e := range replayed {
		c, err := canonicalEnvelope(e)
		if err != nil {
			return fmt.Sprintf("replayed event %d: %v", i, err), 0
		}
		got[i] = c
	}
	want := make([]event.Envelope, len(recorded))
	for i, raw := range recorded {
		want[i], _ = event.Decode(raw, event.Limits{}) // checked by loadHistory
	}
	wm, gm := branchMarks(want), branchMarks(replayed)
	for i := 0; i < max(len(recorded), len(got)); i++ {
		if i >= len(recorded) || i >= len(got) {
			return describeDiff(i, recorded, got), 0
		}
		if bytes.Equal(recorded[i], got[i]) {
			continue
		}
		if !wm[i] || !gm[i] {
			return describeDiff(i, recorded, got), 0
		}
		end := i
		for end < len(want) && wm[end] && end < len(gm) && gm[end] {
			end++
		}
		start := i
		for start > 0 && wm[start-1] && gm[start-1] {
			start--
		}
		if msg := sameBlock(want[start:end], replayed[start:end]); msg != "" {
			return fmt.Sprintf("the Parallel block #%d–#%d: %s\n%s", start, end-1, msg, describeDiff(i, recorded, got)), 0
		}
		reordered++
		i = end - 1
	}
	return "", reordered
}

func describeDiff(i int, recorded, got [][]byte) string {
	line := func(evs [][]byte) string {
		if i < len(evs) {
			return string(evs[i])
		}
		return "(none)"
	}
	return fmt.Sprintf("first difference at sequence %d (recorded %d events, replayed %d):\n  recorded: %s\n  replayed: %s",
		i, len(recorded), len(got), line(recorded), line(got))
}

// branchMarks marks the events of a log that Parallel branches wrote.
func branchMarks(evs []event.Envelope) []bool {
	marks := make([]bool, len(evs))
	inBranch := map[string]bool{}
	for i, e := range evs {
		var p struct {
			StepID string `json:"stepId"`
			Branch string `json:"branch"`
		}
		_ = json.Unmarshal(e.PayloadOrNull(), &p)
		switch e.Type {
		case event.StepStarted:
			inBranch[p.StepID] = p.Branch != ""
			marks[i] = p.Branch != ""
		case event.StepRetrying, event.StepCompleted, event.StepFailed:
			marks[i] = inBranch[p.StepID]
		}
	}
	return marks
}

// sameBlock compares two runs of branch events as the relaxation allows.
func sameBlock(want, got []event.Envelope) string {
	split := func(evs []event.Envelope) (frames, contents []string) {
		for _, e := range evs {
			f, _ := canonicalEnvelope(event.Envelope{ID: e.ID, WorkflowID: e.WorkflowID, ExecutionID: e.ExecutionID,
				Sequence: e.Sequence, Timestamp: e.Timestamp, Type: "-"})
			c := event.MustCanonical(mustJSON(map[string]any{"eventType": e.Type, "payload": e.PayloadOrNull(), "metadata": e.Metadata}))
			frames, contents = append(frames, string(f)), append(contents, string(c))
		}
		sort.Strings(contents)
		return frames, contents
	}
	wf, wc := split(want)
	gf, gc := split(got)
	if !slices.Equal(wf, gf) {
		return "ids, sequences or timestamps differ"
	}
	if !slices.Equal(wc, gc) {
		return "the branches recorded other events"
	}
	return ""
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
