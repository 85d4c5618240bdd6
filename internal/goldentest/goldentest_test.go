package goldentest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
)

// envelope is event number seq of the execution "x" of flow "f".
func envelope(seq int64, typ, payload string) event.Envelope {
	return event.Envelope{ID: fmt.Sprintf("ev-%04d", seq+1), WorkflowID: "f", ExecutionID: "x", Type: typ,
		Sequence: seq, Timestamp: Epoch, Payload: []byte(payload)}
}

// parallelLog is a start, a two-branch block (a, then b) and the end;
// swap writes the block with b first, every position keeping its frame.
func parallelLog(swap bool, aOutput string) []event.Envelope {
	a := [][2]string{{event.StepStarted, `{"branch":"0","stepId":"a"}`}, {event.StepCompleted, `{"output":` + aOutput + `,"stepId":"a"}`}}
	b := [][2]string{{event.StepStarted, `{"branch":"1","stepId":"b"}`}, {event.StepCompleted, `{"output":2,"stepId":"b"}`}}
	block := append(a, b...)
	if swap {
		block = append(b, a...)
	}
	log := []event.Envelope{envelope(0, event.ExecutionStarted, `{"input":null}`)}
	for _, e := range block {
		log = append(log, envelope(int64(len(log)), e[0], e[1]))
	}
	return append(log, envelope(int64(len(log)), event.ExecutionCompleted, `{"result":3}`))
}

func canonicalLog(t *testing.T, log []event.Envelope) [][]byte {
	t.Helper()
	raw := make([][]byte, len(log))
	for i, e := range log {
		c, err := Canonical(e)
		if err != nil {
			t.Fatal(err)
		}
		raw[i] = c
	}
	return raw
}

func TestDiffRelaxesOnlyTheInterleavingOfBranches(t *testing.T) {
	recorded := canonicalLog(t, parallelLog(false, "1"))
	if msg, n := Diff(recorded, parallelLog(false, "1")); msg != "" || n != 0 {
		t.Fatalf("the same log: %q, %d reordered", msg, n)
	}
	if msg, n := Diff(recorded, parallelLog(true, "1")); msg != "" || n != 1 {
		t.Fatalf("the branches in another interleaving: %q, %d reordered; want a match and 1", msg, n)
	}
	if msg, _ := Diff(recorded, parallelLog(true, "9")); !strings.Contains(msg, "the branches recorded other events") {
		t.Fatalf("a branch with another output, reordered: %q", msg)
	}
	if msg, _ := Diff(recorded, parallelLog(false, "9")); !strings.Contains(msg, "first difference at sequence 2") {
		t.Fatalf("a branch with another output: %q", msg)
	}
	shorter := parallelLog(false, "1")
	if msg, _ := Diff(recorded, shorter[:len(shorter)-1]); !strings.Contains(msg, "replayed: (none)") {
		t.Fatalf("a replay that stops early: %q", msg)
	}
	// Outside a block nothing may move: the end re-stamped is a difference.
	late := parallelLog(false, "1")
	late[len(late)-1].Timestamp++
	if msg, _ := Diff(recorded, late); !strings.Contains(msg, "first difference at sequence 5") {
		t.Fatalf("the end at another instant: %q", msg)
	}
}

// fatalRecorder is a testing.TB whose Fatal ends only the goroutine that
// called it, keeping the message, so a test can see a helper refuse.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *fatalRecorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// refusal runs fn with a fatalRecorder and returns the message it failed
// with ("" when it did not).
func refusal(t *testing.T, fn func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r.msg
}

func TestLoadReadsWhatWriteWroteAndRefusesAnEdit(t *testing.T) {
	dir := t.TempDir()
	log := []event.Envelope{envelope(0, event.ExecutionStarted, `{"input":{"n":1}}`),
		envelope(1, event.ExecutionSuspended, `{"on":"ok"}`),
		envelope(2, event.ExecutionResumed, `{"eventType":"ok","payload":true}`),
		envelope(3, event.ExecutionCompleted, `{"result":1}`)}
	Write(t, dir, "h", "f", "a test history", log)
	h := Load(t, dir, "h")
	if err := SameActions(h.Actions, []Action{StartWith(map[string]int{"n": 1}), Answer("ok", true)}); err != nil {
		t.Fatal(err)
	}
	if h.ID != "x" || len(h.Raw) != len(log) || h.Actions[1].Seq != 2 {
		t.Fatalf("loaded execution %q, %d events, answer at %d", h.ID, len(h.Raw), h.Actions[1].Seq)
	}
	path := filepath.Join(dir, "h.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, edit := range []struct{ from, to, refusal string }{
		{`"name": "h"`, `"name":"h"`, "not in the form the recorder writes"},
		{`"result":1`, `"result": 1`, "event 3 is not a canonical envelope"},
		{`"sequence":3`, `"sequence":4`, "event 3 (sequence 4"},
	} {
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), edit.from, edit.to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if msg := refusal(t, func(tb testing.TB) { Load(tb, dir, "h") }); !strings.Contains(msg, edit.refusal) {
			t.Errorf("Load with %s edited to %s: %q, want %q", edit.from, edit.to, msg, edit.refusal)
		}
	}
}

func TestLoadRefusesAnInputTheHarnessCannotReplay(t *testing.T) {
	dir := t.TempDir()
	Write(t, dir, "c", "f", "cancelled", []event.Envelope{envelope(0, event.ExecutionStarted, `{"input":null}`),
		envelope(1, event.ExecutionCancelled, `{}`)})
	if msg := refusal(t, func(tb testing.TB) { Load(tb, dir, "c") }); !strings.Contains(msg, "a caller input the harness does not replay") {
		t.Fatalf("Load of a cancelled execution: %q", msg)
	}
}

func TestIDsContinueFromTheLog(t *testing.T) {
	g, err := idsAfter("ev-0041")
	if err != nil || g.next() != "ev-0042" {
		t.Fatalf("after ev-0041: %v", err)
	}
	if _, err := idsAfter("4f1c"); err == nil {
		t.Fatal("an id the generator did not mint was accepted")
	}
}

// TestOnlyTestsImportIt is the contract of the package doc: no package of
// the module's build graph imports goldentest; only _test.go files do.
func TestOnlyTestsImportIt(t *testing.T) {
	const self = "github.com/loom-kernel/loom/internal/goldentest"
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "github.com/loom-kernel/loom/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	listed := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		listed++
		if pkg != self && strings.Contains(" "+imports+" ", " "+self+" ") {
			t.Errorf("%s imports %s, a test helper: only its tests may", pkg, self)
		}
	}
	if listed < 10 {
		t.Fatalf("go list listed %d packages; the guard would check nothing", listed)
	}
}
