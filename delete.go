package loom

import (
	"context"
	"errors"
	"strconv"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// DeleteReport is what DeleteExecution deleted, or with a dry run would
// delete.
type DeleteReport struct {
	DryRun      bool   `json:"dryRun"`
	ExecutionID string `json:"executionId"`
	// Events is the number of events in its log (those compaction moved
	// out are Archived).
	Events int64 `json:"events"`
	// Snapshots is the number of its snapshots (counted when the snapshot
	// store can list them).
	Snapshots int `json:"snapshots"`
	// Archived is the number of its events in Config.Archive.
	Archived int `json:"archived"`
	// Timers are the keys of its kernel timers (park and deadline).
	Timers []string `json:"timers"`
	// InboxStreams are the inbox streams of its chain, which go with it
	// unless it continued as new (its successor reads them on).
	InboxStreams []string `json:"inboxStreams"`
}

// DeleteRefusal names why DeleteExecution kept an execution.
type DeleteRefusal string

// The reasons DeleteExecution refuses.
const (
	// DeleteRefusedNotEnded: the execution has not ended (it is pending,
	// running or parked).
	DeleteRefusedNotEnded DeleteRefusal = "not-ended"
	// DeleteRefusedPinned: a branch ref points at it, as ApplyRetention
	// keeps it.
	DeleteRefusedPinned DeleteRefusal = "pinned-by-ref"
	// DeleteRefusedAwaited: it is a child (or a link of a child's
	// continue-as-new chain) whose parent is live and has not received
	// its end: the parent would wait for it forever.
	DeleteRefusedAwaited DeleteRefusal = "awaited-by-parent"
	// DeleteRefusedSuccessorMissing: it continued as new and its
	// successor has not started: recovery starts it from this record.
	DeleteRefusedSuccessorMissing DeleteRefusal = "successor-not-started"
	// DeleteRefusedInboxStream: the id names an inbox stream, which goes
	// with the execution whose chain it serves.
	DeleteRefusedInboxStream DeleteRefusal = "inbox-stream"
	// DeleteRefusedBusy: this process holds the execution (a drive, a
	// resume or another delete).
	DeleteRefusedBusy DeleteRefusal = "busy"
)

// DeleteRefusedError is DeleteExecution's refusal: Reason says what keeps
// the execution and Detail what to do. Nothing was deleted.
type DeleteRefusedError struct {
	ExecutionID string
	Reason      DeleteRefusal
	Detail      string
}

func (e *DeleteRefusedError) Error() string {
	return "loom: delete of " + strconv.Quote(e.ExecutionID) + " refused (" + string(e.Reason) + "): " + e.Detail + "; nothing was deleted"
}

// DeleteExecution deletes one ended execution with everything kept for it:
// its kernel timers (park and deadline), then — through the deletion
// ApplyRetention uses for an expired execution, in its order — the inbox
// streams of its chain (unless it continued as new), its archived history,
// its snapshots and, last, its log, so a crash part-way leaves a log that
// a second DeleteExecution finishes. With dryRun it changes nothing and
// reports what it would delete.
//
// It keeps what retention keeps, and what would break a live execution,
// refusing with *DeleteRefusedError and deleting nothing: an execution
// that has not ended, one a branch ref points at, a child whose live
// parent has not received its end, a continued execution whose successor
// has not started, an inbox stream, and one this process holds. Unlike a
// retention pass no TTL applies: the caller chose the execution. An id
// with no log is ErrExecutionNotFound (so is another tenant's, for a
// caller whose principal names a tenant). With an Authorizer, a delete —
// a dry run too — is a "delete", and a denial is recorded as
// EXECUTION_DENIED. It needs an event store that is a
// store.ExecutionDeleter, a snapshot store (when set) that is a
// store.SnapshotDeleter, and an archive that is a store.ArchiveDeleter when
// it holds events of the execution: *NotConfiguredError otherwise, before
// anything is deleted.
//
// Another node's drive is not fenced out: like retention, run it where no
// other process re-opens the execution meanwhile (ResumeAs).
func (rt *Runtime) DeleteExecution(ctx context.Context, id string, dryRun bool) (DeleteReport, error) {
	rep := DeleteReport{DryRun: dryRun, ExecutionID: id, Timers: []string{}, InboxStreams: []string{}}
	if err := event.ValidateID("execution id", id); err != nil {
		return rep, err
	}
	if store.IsInboxStream(id) {
		return rep, &DeleteRefusedError{ExecutionID: id, Reason: DeleteRefusedInboxStream,
			Detail: "an inbox stream is deleted with the execution whose chain it serves: delete that execution"}
	}
	deleter, ok := rt.cfg.Events.(store.ExecutionDeleter)
	if !ok {
		return rep, &NotConfiguredError{Field: "Events", Need: "DeleteExecution (an event store that is a store.ExecutionDeleter)"}
	}
	if _, ok := rt.cfg.Snapshots.(store.SnapshotDeleter); rt.cfg.Snapshots != nil && !ok {
		return rep, &NotConfiguredError{Field: "Snapshots", Need: "DeleteExecution (a snapshot store that is a store.SnapshotDeleter, so no snapshot outlives its log)"}
	}
	// Before the claim: a denial is recorded through a transaction.
	if err := rt.authorize(ctx, "delete", id, "", true); err != nil {
		return rep, err
	}
	// The claim keeps this process's drives, resumes and re-openings out
	// until the delete is done.
	x, err := rt.claim(id, nil)
	if errors.Is(err, errBusy) {
		// Held here: most likely parked or running, which says more.
		l, err := rt.load(ctx, id)
		if err != nil {
			return rep, err
		}
		if !l.state.Status.Terminal() {
			return rep, rt.deletable(ctx, id, l.state)
		}
		return rep, &DeleteRefusedError{ExecutionID: id, Reason: DeleteRefusedBusy,
			Detail: "this process is driving or changing it: retry once it has settled"}
	}
	if err != nil {
		return rep, err
	}
	defer rt.release(x)
	l, err := rt.load(ctx, id)
	if err != nil {
		return rep, err
	}
	if err := rt.deletable(ctx, id, l.state); err != nil {
		return rep, err
	}
	archived, err := rt.measureDeletion(ctx, &rep, l)
	if err != nil || dryRun {
		return rep, err
	}
	for _, key := range rep.Timers {
		if err := rt.deleteTimer(ctx, key); err != nil {
			return rep, err
		}
	}
	return rep, rt.deleteExecution(ctx, deleter, archived, id, rep.InboxStreams)
}

// deletable refuses an execution DeleteExecution must keep.
func (rt *Runtime) deletable(ctx context.Context, id string, st fold.State) error {
	if !st.Status.Terminal() {
		return &DeleteRefusedError{ExecutionID: id, Reason: DeleteRefusedNotEnded,
			Detail: "it is " + string(st.Status) + ", not ended: cancel it first, or let it end"}
	}
	pinned, err := rt.pinnedByRefs(ctx)
	if err != nil {
		return err
	}
	if ref, ok := pinned[id]; ok {
		return &DeleteRefusedError{ExecutionID: id, Reason: DeleteRefusedPinned,
			Detail: "the branch ref " + strconv.Quote(ref) + " points at it: move or delete the ref first"}
	}
	parent, status, err := rt.awaitingParent(ctx, id, st)
	if err != nil {
		return err
	}
	if parent != "" {
		return &DeleteRefusedError{ExecutionID: id, Reason: DeleteRefusedAwaited,
			Detail: "its parent " + strconv.Quote(parent) + " is " + string(status) + " and has not received its end: " +
				"let the parent await it (or end), then delete it"}
	}
	if next := st.Variables.ContinuedTo; st.Status == fold.StatusContinued && next != "" {
		head, err := store.ReadRange(ctx, rt.cfg.Events, next, 0, 1)
		if err != nil {
			return err
		}
		if len(head) == 0 {
			return &DeleteRefusedError{ExecutionID: id, Reason: DeleteRefusedSuccessorMissing,
				Detail: "it continued as " + strconv.Quote(next) + ", which has not started, and recovery starts it from this execution's record: " +
					"let a recovery pass start it (Runtime.Recover), then delete it"}
		}
	}
	return nil
}

// awaitingParent returns the parent, and its status, of a child (or of a
// link of a child's continue-as-new chain, whose parent is the chain's
// first execution's) when that parent is live and has not received the
// child's end; "" otherwise. A parent that no longer exists awaits nothing.
func (rt *Runtime) awaitingParent(ctx context.Context, id string, st fold.State) (string, fold.Status, error) {
	child, raw := id, st.Variables.Parent
	if raw == nil && st.Variables.Chain != nil {
		var link chainLink
		if unmarshalRecorded(st.Variables.Chain, &link) == nil && link.ID != "" && link.ID != id {
			root, err := rt.load(ctx, link.ID)
			if errors.Is(err, ErrExecutionNotFound) {
				return "", "", nil
			}
			if err != nil {
				return "", "", err
			}
			child, raw = link.ID, root.state.Variables.Parent
		}
	}
	var p parentLink
	if raw == nil || unmarshalRecorded(raw, &p) != nil || p.ExecutionID == "" {
		return "", "", nil
	}
	parent, err := rt.load(ctx, p.ExecutionID)
	if errors.Is(err, ErrExecutionNotFound) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	if parent.state.Status.Terminal() || receivedChildren(parent.state)[child] {
		return "", "", nil
	}
	return p.ExecutionID, parent.state.Status, nil
}

// measureDeletion fills rep with what deleting l's execution removes, and
// returns the archive to delete its history from (nil when it has none).
func (rt *Runtime) measureDeletion(ctx context.Context, rep *DeleteReport, l loaded) (store.ArchiveDeleter, error) {
	id := rep.ExecutionID
	info := store.ExecutionInfo{ExecutionID: id, WorkflowID: l.workflowID, Length: l.state.Sequence + 1}
	rep.Events = info.Length - rt.trimPoint(ctx, id)
	if lister, ok := rt.cfg.Snapshots.(store.SnapshotLister); ok {
		seqs, err := lister.ListSequences(ctx, id)
		if err != nil {
			return nil, err
		}
		rep.Snapshots = len(seqs)
	}
	if rt.cfg.Timers != nil {
		for _, key := range []string{parkTimerKey(id), deadlineTimerKey(id)} {
			t, ok, err := rt.cfg.Timers.Get(ctx, key)
			if err != nil {
				return nil, err
			}
			if ok && t.ExecutionID == id {
				rep.Timers = append(rep.Timers, key)
			}
		}
	}
	streams, err := rt.chainStreams(ctx, info)
	if err != nil {
		return nil, err
	}
	rep.InboxStreams = append(rep.InboxStreams, streams...)
	if rt.cfg.Archive == nil {
		return nil, nil
	}
	evs, err := rt.cfg.Archive.ReadArchived(ctx, id, 0, -1)
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	rep.Archived = len(evs)
	archived, ok := rt.cfg.Archive.(store.ArchiveDeleter)
	if !ok {
		return nil, &NotConfiguredError{Field: "Archive", Need: "DeleteExecution of a compacted execution (an archive that is a store.ArchiveDeleter)"}
	}
	return archived, nil
}

// deleteTimer removes the timer under key as it stands now.
func (rt *Runtime) deleteTimer(ctx context.Context, key string) error {
	t, ok, err := rt.cfg.Timers.Get(ctx, key)
	if err != nil || !ok {
		return err
	}
	_, err = rt.cfg.Timers.Delete(ctx, key, t.WakeAt)
	return err
}
