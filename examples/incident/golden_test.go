package main

// Golden histories of the incident flow (STYLE rule 12), kept beside the
// kernel's in testdata/histories as incident-*.json, in the same format
// (testdata/histories/README.md). This package is a command, so it cannot
// import the kernel's harness (golden_test.go of package loom_test); this
// is the part of it the incident needs: a start and gate answers, replayed
// by a fresh runtime and by a new process from the recorded park.
//
// Regenerate with: go test ./examples/incident/ -run Golden -update-histories

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

var goldenUpdate = flag.Bool("update-histories", false,
	"rewrite the incident histories from today's code; only legitimate when the change to the logs is intended")

const (
	goldenDir    = "../../testdata/histories"
	goldenFormat = "loom-golden-history/1"
	goldenEpoch  = int64(1_767_225_600_000) // 2026-01-01T00:00:00Z
	goldenTick   = int64(60_000)
)

// goldenIncidentCase is one incident history and the script that records it.
type goldenIncidentCase struct {
	name        string
	description string
	input       Incident
	answers     []Approval // one per park, in order
}

var goldenIncidentCases = []goldenIncidentCase{
	{name: "incident-approved", input: Incident{Service: "checkout", Symptom: "p99 latency above 2s"},
		answers:     []Approval{{Approved: true, By: "ann"}},
		description: "the remediation flow: signals, three parallel diagnoses, the model's plan, a recorded decision and emit, the timed approval gate answered yes, the non-idempotent fix"},
	{name: "incident-rejected", input: Incident{Service: "checkout", Symptom: "p99 latency above 2s"},
		answers:     []Approval{{Approved: false, By: "bob", Reason: "change freeze"}},
		description: "the same incident rejected at the gate: the flow escalates instead of applying the fix"},
	{name: "incident-memory", input: Incident{Service: "search", Symptom: "memory climbing, pods OOM-killed"},
		answers:     []Approval{{Approved: true, By: "carol"}},
		description: "the memory scenario: the logs diagnosis wins and the plan is a restart"},
}

func TestGoldenIncidentHistories(t *testing.T) {
	var names []string
	for _, c := range goldenIncidentCases {
		names = append(names, c.name)
		t.Run(c.name, func(t *testing.T) {
			if *goldenUpdate {
				goldenWrite(t, c, goldenRecord(t, c))
			}
			h := goldenLoad(t, c.name)
			if h.description != c.description {
				t.Fatalf("%s is described %q, the case %q: regenerate it if the change is intended", c.name, h.description, c.description)
			}
			if err := h.sameScript(c); err != nil {
				t.Fatalf("%v: the case changed since %s was recorded; regenerate it if the change is intended", err, c.name)
			}
			// A fresh runtime drives the whole scenario, once more under
			// options the log must not depend on (sticky parks, step
			// durability, a snapshot every 2 events); then a new process is
			// handed the recorded prefix up to each park and answers it.
			for cut := -2; cut < len(h.answers); cut++ {
				from, neutral := 0, cut == -2
				mode := "a fresh runtime driving the whole scenario"
				switch {
				case neutral:
					mode = "a fresh runtime under the log-neutral options"
				case cut >= 0:
					from = h.answers[cut].seq
					mode = fmt.Sprintf("a new process handed the recorded prefix #0–#%d", from-1)
				}
				log, fx := goldenReplay(t, h, from, neutral)
				msg, reordered := goldenDiff(h.raw, log)
				if msg != "" {
					t.Fatalf("%s: %s did not reproduce the history:\n%s", c.name, mode, msg)
				}
				if reordered > 0 {
					t.Logf("%s: %s: %d Parallel block(s) recorded in another interleaving", c.name, mode, reordered)
				}
				goldenCheckEffects(t, mode, h.envs[from:], fx)
			}
		})
	}
	files, err := filepath.Glob(filepath.Join(goldenDir, "incident-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".json"); !slices.Contains(names, name) {
			t.Errorf("%s is replayed by no case: add its case or remove the file", f)
		}
	}
}

// goldenFile is the history file format the kernel's harness defines.
type goldenFile struct {
	Format      string            `json:"format"`
	Name        string            `json:"name"`
	Flow        string            `json:"flow"`
	Description string            `json:"description"`
	Events      []json.RawMessage `json:"events"`
}

func goldenEncode(f goldenFile) []byte {
	str := func(s string) string {
		b, _ := json.Marshal(s)
		return string(event.MustCanonical(b))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"format\": %s,\n  \"name\": %s,\n  \"flow\": %s,\n  \"description\": %s,\n  \"events\": [\n",
		str(f.Format), str(f.Name), str(f.Flow), str(f.Description))
	for i, e := range f.Events {
		b.WriteString("    ")
		b.Write(e)
		if i < len(f.Events)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes()
}

func goldenCanonical(e event.Envelope) ([]byte, error) {
	b, err := event.Encode(e)
	if err != nil {
		return nil, err
	}
	return event.Canonical(b)
}

// goldenAnswer is a gate answer derived from the log: an EXECUTION_RESUMED.
type goldenAnswer struct {
	seq       int
	at        int64
	eventType string
	payload   json.RawMessage
}

type goldenHistory struct {
	description string
	raw         [][]byte
	envs        []event.Envelope
	id          string
	startAt     int64
	input       json.RawMessage
	answers     []goldenAnswer
}

// goldenLoad reads a history and derives its scenario: the start from
// EXECUTION_STARTED, a gate answer from each EXECUTION_RESUMED. Any other
// caller input is more than this harness replays.
func goldenLoad(t *testing.T, name string) *goldenHistory {
	t.Helper()
	path := filepath.Join(goldenDir, name+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with: go test ./examples/incident/ -run Golden -update-histories)", err)
	}
	var f goldenFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if f.Format != goldenFormat || f.Name != name || f.Flow != flowID || !bytes.Equal(goldenEncode(f), data) {
		t.Fatalf("%s: not a %s history of %s in the recorder's form (edited by hand?)", path, goldenFormat, flowID)
	}
	h := &goldenHistory{description: f.Description}
	for i, raw := range f.Events {
		e, err := event.Decode(raw, event.Limits{})
		if err != nil {
			t.Fatalf("%s: event %d: %v", path, i, err)
		}
		if c, err := goldenCanonical(e); err != nil || !bytes.Equal(c, raw) || e.Sequence != int64(i) || e.WorkflowID != flowID {
			t.Fatalf("%s: event %d is not the canonical next envelope of one execution (%v)", path, i, err)
		}
		var p struct {
			Input     json.RawMessage `json:"input"`
			EventType string          `json:"eventType"`
			Payload   json.RawMessage `json:"payload"`
		}
		_ = json.Unmarshal(e.PayloadOrNull(), &p)
		switch e.Type {
		case event.ExecutionStarted:
			h.id, h.startAt, h.input = e.ExecutionID, e.Timestamp, p.Input
		case event.ExecutionResumed:
			h.answers = append(h.answers, goldenAnswer{seq: i, at: e.Timestamp, eventType: p.EventType, payload: p.Payload})
		case event.TimerFired, event.ExecutionRecovered, event.ApprovalGranted, event.ExecutionMigrated, event.ExecutionCancelled:
			t.Fatalf("%s: event %d: %s is a caller input this harness does not replay", path, i, e.Type)
		}
		h.raw, h.envs = append(h.raw, raw), append(h.envs, e)
	}
	if len(h.envs) == 0 || h.envs[0].Type != event.ExecutionStarted {
		t.Fatalf("%s does not begin with EXECUTION_STARTED", path)
	}
	return h
}

func (h *goldenHistory) sameScript(c goldenIncidentCase) error {
	canon := func(v any) string {
		b, _ := json.Marshal(v)
		return string(event.MustCanonical(b))
	}
	if h.id != c.name || string(event.MustCanonical(h.input)) != canon(c.input) || len(h.answers) != len(c.answers) {
		return fmt.Errorf("the log starts %s with %s and answers %d parks", h.id, h.input, len(h.answers))
	}
	for i, a := range h.answers {
		if a.eventType != approvalGate || string(event.MustCanonical(a.payload)) != canon(c.answers[i]) {
			return fmt.Errorf("answer %d is %s %s", i, a.eventType, a.payload)
		}
	}
	return nil
}

// goldenClock stands still during a drive and moves to each action's instant.
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

// goldenWorld is one replay: memory stores, the clock, one process.
type goldenWorld struct {
	t      *testing.T
	ctx    context.Context
	id     string
	events *memstore.EventStore
	timers *memstore.TimerStore
	clock  *goldenClock
	fx     *effectCounter
	rt     *loom.Runtime
}

// goldenOpen starts a process on fresh stores holding prefix. Sticky parks
// are off, so the resume re-runs the flow and serves what the log holds;
// event ids continue from the prefix's last (ev-0001, ev-0002…).
func goldenOpen(t *testing.T, id string, prefix []event.Envelope, neutral bool) *goldenWorld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	w := &goldenWorld{t: t, ctx: ctx, id: id, events: memstore.NewEventStore(), timers: memstore.NewTimerStore(),
		clock: &goldenClock{}, fx: newEffectCounter()}
	n := 0
	if len(prefix) > 0 {
		if err := w.events.Append(ctx, id, 0, prefix); err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscanf(prefix[len(prefix)-1].ID, "ev-%d", &n); err != nil {
			t.Fatalf("event id %q was not minted by the golden id generator", prefix[len(prefix)-1].ID)
		}
	}
	var mu sync.Mutex
	next := func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("ev-%04d", n)
	}
	cfg := loom.Config{Events: w.events, Snapshots: memstore.NewSnapshotStore(), Timers: w.timers,
		TimerPoll: -1, Flows: []*loom.Flow{newRemediateFlow(w.fx)}, Clock: w.clock, NewID: next, NodeID: "golden-node", StickyParks: -1}
	if neutral {
		cfg.StickyParks, cfg.Durability, cfg.SnapshotEvery = 0, loom.StepDurable, 2
	}
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.rt = rt
	t.Cleanup(func() { _ = rt.Close() }) // Close reports nothing but success
	return w
}

// settle waits until the drive parks or ends, and for an end, until the
// drive has stopped.
func (w *goldenWorld) settle() {
	w.t.Helper()
	st, err := w.rt.WaitForSettled(w.ctx, w.id)
	if err == nil && st.Status.Terminal() {
		_, err = w.rt.WaitForCompletion(w.ctx, w.id)
	}
	if err != nil {
		w.t.Fatal(err)
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

func (w *goldenWorld) answer(at int64, eventType string, payload json.RawMessage) {
	w.t.Helper()
	w.clock.set(at)
	if err := w.rt.Resume(w.ctx, w.id, loom.ResumeEvent{EventType: eventType, Payload: payload}); err != nil {
		w.t.Fatal(err)
	}
	w.settle()
}

// goldenRecord runs the case's script: the start at goldenEpoch, each answer
// goldenTick after the previous action.
func goldenRecord(t *testing.T, c goldenIncidentCase) []event.Envelope {
	t.Helper()
	w := goldenOpen(t, c.name, nil, false)
	w.clock.set(goldenEpoch)
	if _, err := w.rt.Start(w.ctx, flowID, c.input, loom.WithExecutionID(c.name)); err != nil {
		t.Fatal(err)
	}
	w.settle()
	for i, a := range c.answers {
		payload, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		w.answer(goldenEpoch+int64(i+1)*goldenTick, approvalGate, payload)
	}
	return w.log()
}

func goldenWrite(t *testing.T, c goldenIncidentCase, log []event.Envelope) {
	t.Helper()
	f := goldenFile{Format: goldenFormat, Name: c.name, Flow: flowID, Description: c.description}
	for _, e := range log {
		b, err := goldenCanonical(e)
		if err != nil {
			t.Fatal(err)
		}
		f.Events = append(f.Events, b)
	}
	// A file the recording matches (up to a Parallel block's interleaving)
	// is left as it is: regenerating without a change to the log changes
	// no file.
	path := filepath.Join(goldenDir, c.name+".json")
	var old goldenFile
	if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &old) == nil &&
		old.Format == f.Format && old.Flow == f.Flow && old.Description == f.Description {
		raw := make([][]byte, len(old.Events))
		for i, e := range old.Events {
			raw[i] = e
		}
		if msg, _ := goldenDiff(raw, log); msg == "" {
			return
		}
	}
	if err := os.WriteFile(path, goldenEncode(f), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// goldenReplay drives h's scenario on a world holding the log before from
// (0: a fresh world), under the log-neutral options when neutral, and
// returns the log and the effects that ran.
func goldenReplay(t *testing.T, h *goldenHistory, from int, neutral bool) ([]event.Envelope, *effectCounter) {
	t.Helper()
	w := goldenOpen(t, h.id, h.envs[:from], neutral)
	if from == 0 {
		w.clock.set(h.startAt)
		if _, err := w.rt.Start(w.ctx, flowID, h.input, loom.WithExecutionID(h.id)); err != nil {
			t.Fatal(err)
		}
		w.settle()
	}
	for _, a := range h.answers {
		if a.seq >= from {
			w.answer(a.at, a.eventType, a.payload)
		}
	}
	if err := w.rt.Close(); err != nil {
		t.Fatal(err)
	}
	// The answer made the approval's timeout pointless: its timer is dropped.
	if left, err := w.timers.Due(w.ctx, math.MaxInt64, 10); err != nil || len(left) > 0 {
		t.Errorf("the incident ended and left timers %+v behind (%v)", left, err)
	}
	return w.log(), w.fx
}

// goldenCheckEffects: each step's effect ran once per attempt the replayed
// part of the log records; the steps before the cut were served.
func goldenCheckEffects(t *testing.T, mode string, tail []event.Envelope, fx *effectCounter) {
	t.Helper()
	attempts := map[string]int{}
	for _, e := range tail {
		var p struct {
			StepID string `json:"stepId"`
		}
		_ = json.Unmarshal(e.PayloadOrNull(), &p)
		if e.Type == event.StepStarted || e.Type == event.StepRetrying {
			attempts[p.StepID]++
		}
	}
	fx.mu.Lock()
	defer fx.mu.Unlock()
	for _, id := range stepOrder {
		if fx.real[id] != attempts[id] || fx.simulated[id] != 0 {
			t.Errorf("%s: step %s ran %d times (%d simulated), the log records %d attempts", mode, id, fx.real[id], fx.simulated[id], attempts[id])
		}
	}
}

// goldenDiff compares envelope by envelope in canonical JSON and describes
// the first difference; within a run of Parallel branch events the order
// may differ (ids, sequences and timestamps stay per position, the events
// stay byte for byte) — the rule of the kernel's harness. It also counts
// the blocks that matched only in another interleaving.
func goldenDiff(recorded [][]byte, replayed []event.Envelope) (string, int) {
	got := make([][]byte, len(replayed))
	for i, e := range replayed {
		got[i], _ = goldenCanonical(e)
	}
	want := make([]event.Envelope, len(recorded))
	for i, raw := range recorded {
		want[i], _ = event.Decode(raw, event.Limits{})
	}
	describe := func(i int) string {
		line := func(evs [][]byte) string {
			if i < len(evs) {
				return string(evs[i])
			}
			return "(none)"
		}
		return fmt.Sprintf("first difference at sequence %d (recorded %d events, replayed %d):\n  recorded: %s\n  replayed: %s",
			i, len(recorded), len(got), line(recorded), line(got))
	}
	wm, gm := goldenBranchMarks(want), goldenBranchMarks(replayed)
	reordered := 0
	for i := 0; i < max(len(recorded), len(got)); i++ {
		if i >= len(recorded) || i >= len(got) {
			return describe(i), 0
		}
		if bytes.Equal(recorded[i], got[i]) {
			continue
		}
		if !wm[i] || !gm[i] {
			return describe(i), 0
		}
		start, end := i, i
		for start > 0 && wm[start-1] && gm[start-1] {
			start--
		}
		for end < len(want) && end < len(gm) && wm[end] && gm[end] {
			end++
		}
		if !goldenSameBlock(want[start:end], replayed[start:end]) {
			return fmt.Sprintf("the Parallel block #%d–#%d holds other events\n%s", start, end-1, describe(i)), 0
		}
		reordered++
		i = end - 1
	}
	return "", reordered
}

func goldenBranchMarks(evs []event.Envelope) []bool {
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

func goldenSameBlock(want, got []event.Envelope) bool {
	split := func(evs []event.Envelope) (frames, contents []string) {
		for _, e := range evs {
			f, _ := goldenCanonical(event.Envelope{ID: e.ID, WorkflowID: e.WorkflowID, ExecutionID: e.ExecutionID,
				Sequence: e.Sequence, Timestamp: e.Timestamp, Type: "-"})
			b, _ := json.Marshal(map[string]any{"eventType": e.Type, "payload": e.PayloadOrNull(), "metadata": e.Metadata})
			frames, contents = append(frames, string(f)), append(contents, string(event.MustCanonical(b)))
		}
		sort.Strings(contents)
		return frames, contents
	}
	wf, wc := split(want)
	gf, gc := split(got)
	return slices.Equal(wf, gf) && slices.Equal(wc, gc)
}
