package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// statusSeeds are the seeds of AgreesWithTheFold; a failure names its seed,
// and the same seed draws the same logs again.
var statusSeeds = []uint64{1, 2, 3, 4}

// agreesWithFold: on seeded logs of every shape, appended in batches of
// every size, the index lists exactly what folding each log says may need
// recovery (CheckUnfinished).
func (k indexKit) agreesWithFold(t *testing.T) {
	for _, seed := range statusSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			s, _ := k.open(t)
			AppendLogs(t, s, StatusLogs(seed), seed)
			CheckUnfinished(t, s)
		})
	}
}

// StatusLogs returns logs, by execution id, of executions in every state a
// StatusIndex distinguishes — running, pending, suspended, re-opened,
// completed, failed, cancelled, continued with and without a successor,
// continued to nobody, a continue without the kernel stamp, an inbox
// stream — and 60 more drawn from seed (the same seed, the same logs).
// Every log is one the fold reads without an inert start or resume, so
// the index must list exactly what CheckUnfinished expects. Stores use it
// to test an index built by a migration from logs written before it.
func StatusLogs(seed uint64) map[string][]event.Envelope {
	logs := map[string][]event.Envelope{
		"s-running":    lifecycle("s-running", 0, event.ExecutionStarted, testType),
		"s-pending":    batchAt("s-pending", 0, 2),
		"s-suspended":  lifecycle("s-suspended", 0, event.ExecutionStarted, event.ExecutionSuspended, event.TimerFired),
		"s-resumed":    lifecycle("s-resumed", 0, event.ExecutionStarted, event.ExecutionSuspended, event.ExecutionResumed, event.ExecutionRecovered),
		"s-completed":  lifecycle("s-completed", 0, event.ExecutionStarted, testType, event.ExecutionCompleted),
		"s-failed":     lifecycle("s-failed", 0, event.ExecutionStarted, event.ExecutionFailed),
		"s-cancelled":  lifecycle("s-cancelled", 0, event.ExecutionStarted, event.ExecutionSuspended, event.ExecutionCancelled),
		"s-reopened":   lifecycle("s-reopened", 0, event.ExecutionStarted, event.ExecutionFailed, event.ExecutionResumed),
		"s-migrated":   lifecycle("s-migrated", 0, event.ExecutionStarted, event.ExecutionMigrated, event.ExecutionRecovered),
		"s-parked-2":   lifecycle("s-parked-2", 0, event.ExecutionStarted, event.ExecutionSuspended, event.ExecutionResumed, event.ExecutionSuspended),
		"s-日本-running": lifecycle("s-日本-running", 0, event.ExecutionStarted),
		"s-continued": append(lifecycle("s-continued", 0, event.ExecutionStarted, testType),
			continuedAt("s-continued", 2, "s-continued~1", true)),
		"s-handed-over": append(lifecycle("s-handed-over", 0, event.ExecutionStarted),
			continuedAt("s-handed-over", 1, "s-running", true)),
		"s-continued-to-nobody": append(lifecycle("s-continued-to-nobody", 0, event.ExecutionStarted),
			continuedAt("s-continued-to-nobody", 1, "", true)),
		"s-continue-unstamped": append(lifecycle("s-continue-unstamped", 0, event.ExecutionStarted, event.ExecutionSuspended),
			continuedAt("s-continue-unstamped", 2, "s-elsewhere", false)),
	}
	inbox := store.InboxStreamPrefix + "9:s-running:topic"
	logs[inbox] = lifecycle(inbox, 0, "__loom_message__", event.ExecutionStarted, "__loom_message__")
	rng := rand.New(rand.NewPCG(seed, 0x5747))
	const n = 60
	for i := range n {
		id := fmt.Sprintf("gen-%03d", i)
		logs[id] = randomLog(rng, id, n)
	}
	return logs
}

// randomLog draws a log of 1 to 12 events of id whose status events are
// read by the fold as the index reads them: a start only while nothing
// has moved the status yet. Continues name gen ids, half of them without
// a log.
func randomLog(rng *rand.Rand, id string, n int) []event.Envelope {
	length := 1 + rng.IntN(12)
	var out []event.Envelope
	moved := false
	for seq := range int64(length) {
		var e event.Envelope
		switch r := rng.IntN(100); {
		case !moved && (seq == 0 && r < 80 || r < 15):
			e = lifecycleAt(id, seq, event.ExecutionStarted)
		case r < 35:
			e = lifecycleAt(id, seq, testType)
		case r < 50:
			e = lifecycleAt(id, seq, event.ExecutionSuspended)
		case r < 64:
			e = lifecycleAt(id, seq, event.ExecutionResumed)
		case r < 68:
			e = lifecycleAt(id, seq, event.ExecutionRecovered)
		case r < 71:
			e = lifecycleAt(id, seq, event.ExecutionMigrated)
		case r < 78:
			e = lifecycleAt(id, seq, event.ExecutionCompleted)
		case r < 82:
			e = lifecycleAt(id, seq, event.ExecutionFailed)
		case r < 86:
			e = lifecycleAt(id, seq, event.ExecutionCancelled)
		case r < 94:
			e = continuedAt(id, seq, fmt.Sprintf("gen-%03d", rng.IntN(2*n)), true)
		case r < 97:
			e = continuedAt(id, seq, fmt.Sprintf("gen-%03d", rng.IntN(2*n)), false)
		default:
			e = continuedAt(id, seq, "", true)
		}
		if movesStatus(e) {
			moved = true
		}
		out = append(out, e)
	}
	return out
}

// AppendLogs appends every log to s, in execution id order, each in
// batches of 1 to 4 events drawn from seed.
func AppendLogs(t *testing.T, s store.EventStore, logs map[string][]event.Envelope, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0xA99E))
	ids := make([]string, 0, len(logs))
	for id := range logs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		evs := logs[id]
		for from := 0; from < len(evs); {
			to := min(len(evs), from+1+rng.IntN(4))
			mustAppend(t, s, id, int64(from), evs[from:to])
			from = to
		}
	}
}

// CheckUnfinished fails t unless the StatusIndex of s lists exactly the
// executions that folding each log of s says may need recovery: status
// pending or running (listed running), suspended (listed suspended), or
// continued to a successor whose log is empty (listed continued, with that
// successor), each at the sequence and timestamp of its last
// status-moving event (its first event when there is none) and with the
// workflow id ListExecutions reports. Inbox streams are never listed.
// Logs must not hold an inert start or resume (see StatusLogs).
func CheckUnfinished(t *testing.T, s store.EventStore) {
	t.Helper()
	x := indexOf(t, s)
	infos := listAll(t, s, "", 100)
	exists := make(map[string]bool, len(infos))
	for _, info := range infos {
		exists[info.ExecutionID] = info.Length > 0
	}
	var want []store.UnfinishedExecution
	for _, info := range infos {
		if store.IsInboxStream(info.ExecutionID) {
			continue
		}
		evs := readAll(t, s, info.ExecutionID)
		if u, ok := foldedEntry(info, evs, exists); ok {
			want = append(want, u)
		}
	}
	got := listUnfinished(t, x, "", 13)
	if !slices.Equal(got, want) {
		t.Fatalf("ListUnfinished disagrees with the fold of the logs:\n got %s\nwant %s",
			renderEntries(got), renderEntries(want))
	}
}

// foldedEntry is the entry the fold of evs calls for, if any.
func foldedEntry(info store.ExecutionInfo, evs []event.Envelope, exists map[string]bool) (store.UnfinishedExecution, bool) {
	st := fold.Fold(evs)
	at := evs[0]
	for i := len(evs) - 1; i >= 0; i-- {
		if movesStatus(evs[i]) {
			at = evs[i]
			break
		}
	}
	u := store.UnfinishedExecution{ExecutionID: info.ExecutionID, WorkflowID: info.WorkflowID,
		Sequence: at.Sequence, Timestamp: at.Timestamp}
	switch st.Status {
	case fold.StatusPending, fold.StatusRunning:
		u.Status = store.UnfinishedRunning
	case fold.StatusSuspended:
		u.Status = store.UnfinishedSuspended
	case fold.StatusContinued:
		if next := st.Variables.ContinuedTo; next == "" || exists[next] {
			return u, false
		}
		u.Status, u.NextExecutionID = store.UnfinishedContinued, st.Variables.ContinuedTo
	default:
		return u, false
	}
	return u, true
}

// movesStatus is the kit's own reading of which events move status (the
// fold's execution-level handlers), independent of store.EventStatus.
func movesStatus(e event.Envelope) bool {
	switch e.Type {
	case event.ExecutionStarted, event.ExecutionSuspended, event.ExecutionResumed,
		event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled:
		return true
	case event.ExecutionContinued:
		return e.Kernel()
	}
	return false
}

// ListAllUnfinished pages through the StatusIndex of s, checking the paging
// contract on the way, and returns every entry: for stores' own tests that
// compare two indexes (one built by a migration, one kept by appends).
func ListAllUnfinished(t *testing.T, s store.EventStore) []store.UnfinishedExecution {
	t.Helper()
	return listUnfinished(t, indexOf(t, s), "", 50)
}
