package loom

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// RetentionPolicy says how long what a runtime stores is kept. The zero
// value keeps everything. Read one from JSON with ParseRetentionPolicy:
//
//	{"terminalTtl": "720h", "keepSnapshots": 2}
type RetentionPolicy struct {
	// TerminalTTL, when positive, deletes an ended execution (completed,
	// failed, cancelled, or continued as new) whose end event is older
	// than this: its log and its snapshots, and with the chain's last
	// execution the chain's inbox streams. An execution a branch ref
	// points at is kept. The archive keeps what compaction moved, unless
	// DeleteArchived.
	TerminalTTL time.Duration
	// DeleteArchived also deletes the archived history (compacted events)
	// of each execution TerminalTTL deletes, before its log, so the id can
	// be reused with nothing of the old life left in the archive. It needs
	// TerminalTTL and an archive that is a store.ArchiveDeleter. Default
	// false: the archive stays, as the audit record.
	DeleteArchived bool
	// KeepSnapshots, when positive, prunes each execution's snapshots to
	// the latest KeepSnapshots, always keeping its compaction checkpoint
	// (the snapshot that stands for its compacted history) and every one
	// after it.
	KeepSnapshots int
	// TrimConsumedMessages moves the inbox messages each execution's chain
	// has consumed into Config.Archive (TrimInbox). It loads every
	// execution.
	TrimConsumedMessages bool
	// ContentUnpinnedAfter would delete claim-checked content no retained
	// log references once it is older than this. No content store can list
	// its blobs yet, so a positive value is refused by Validate.
	ContentUnpinnedAfter time.Duration
}

// RetentionPolicyError refuses a policy: the member and what is wrong.
type RetentionPolicyError struct {
	Member string
	Reason string
}

func (e *RetentionPolicyError) Error() string {
	return "loom: retention policy: " + e.Member + ": " + e.Reason
}

// Validate refuses a negative duration or count, and a
// ContentUnpinnedAfter this version cannot apply.
func (p RetentionPolicy) Validate() error {
	switch {
	case p.TerminalTTL < 0:
		return &RetentionPolicyError{Member: "terminalTtl", Reason: "a negative duration; use a positive one such as \"720h\", or leave it out to keep ended executions"}
	case p.KeepSnapshots < 0:
		return &RetentionPolicyError{Member: "keepSnapshots", Reason: "a negative count; use 1 or more, or leave it out to keep every snapshot"}
	case p.DeleteArchived && p.TerminalTTL == 0:
		return &RetentionPolicyError{Member: "deleteArchived", Reason: "it deletes the archived history of the executions terminalTtl deletes: set terminalTtl too, or leave deleteArchived out"}
	case p.ContentUnpinnedAfter < 0:
		return &RetentionPolicyError{Member: "contentUnpinnedAfter", Reason: "a negative duration"}
	case p.ContentUnpinnedAfter > 0:
		return &RetentionPolicyError{Member: "contentUnpinnedAfter",
			Reason: "not supported yet: no content store lists its blobs, so unreferenced content cannot be found; leave it out"}
	}
	return nil
}

// ParseRetentionPolicy reads a policy from JSON: members terminalTtl and
// contentUnpinnedAfter (Go durations as strings: "720h", "90m"),
// keepSnapshots (a number). An unknown member (names are matched
// exactly), a malformed duration or an invalid value is refused with an
// error naming it.
func ParseRetentionPolicy(data []byte) (RetentionPolicy, error) {
	var raw struct {
		TerminalTTL          *string `json:"terminalTtl"`
		KeepSnapshots        *int    `json:"keepSnapshots"`
		TrimConsumedMessages *bool   `json:"trimConsumedMessages"`
		ContentUnpinnedAfter *string `json:"contentUnpinnedAfter"`
		DeleteArchived       *bool   `json:"deleteArchived"`
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return RetentionPolicy{}, &RetentionPolicyError{Member: "(file)", Reason: "not a JSON object: " + err.Error()}
	}
	for _, name := range slices.Sorted(maps.Keys(members)) {
		switch name {
		case "terminalTtl", "keepSnapshots", "trimConsumedMessages", "contentUnpinnedAfter", "deleteArchived":
		default:
			return RetentionPolicy{}, &RetentionPolicyError{Member: strconv.Quote(name),
				Reason: "unknown member (names are matched exactly): the members are terminalTtl, deleteArchived, keepSnapshots, trimConsumedMessages, contentUnpinnedAfter"}
		}
	}
	if err := event.UnmarshalExactKnown(data, &raw); err != nil {
		return RetentionPolicy{}, &RetentionPolicyError{Member: "(file)",
			Reason: err.Error() + " (members: terminalTtl, keepSnapshots, contentUnpinnedAfter)"}
	}
	var p RetentionPolicy
	for _, d := range []struct {
		member string
		in     *string
		out    *time.Duration
	}{{"terminalTtl", raw.TerminalTTL, &p.TerminalTTL}, {"contentUnpinnedAfter", raw.ContentUnpinnedAfter, &p.ContentUnpinnedAfter}} {
		if d.in == nil {
			continue
		}
		v, err := time.ParseDuration(*d.in)
		if err != nil {
			return RetentionPolicy{}, &RetentionPolicyError{Member: d.member, Reason: "not a duration (" + err.Error() + "); write one such as \"720h\""}
		}
		*d.out = v
	}
	if raw.KeepSnapshots != nil {
		p.KeepSnapshots = *raw.KeepSnapshots
	}
	if raw.TrimConsumedMessages != nil {
		p.TrimConsumedMessages = *raw.TrimConsumedMessages
	}
	if raw.DeleteArchived != nil {
		p.DeleteArchived = *raw.DeleteArchived
	}
	return p, p.Validate()
}

// MarshalJSON writes the policy in ParseRetentionPolicy's form.
func (p RetentionPolicy) MarshalJSON() ([]byte, error) {
	out := map[string]any{}
	if p.TerminalTTL != 0 {
		out["terminalTtl"] = p.TerminalTTL.String()
	}
	if p.KeepSnapshots != 0 {
		out["keepSnapshots"] = p.KeepSnapshots
	}
	if p.TrimConsumedMessages {
		out["trimConsumedMessages"] = true
	}
	if p.DeleteArchived {
		out["deleteArchived"] = true
	}
	if p.ContentUnpinnedAfter != 0 {
		out["contentUnpinnedAfter"] = p.ContentUnpinnedAfter.String()
	}
	return json.Marshal(out)
}

// RetentionReport is what ApplyRetention deleted, or with a dry run would
// delete.
type RetentionReport struct {
	DryRun bool `json:"dryRun"`
	// Executions deleted (ended before the TTL), with their Events.
	Executions []string `json:"executions"`
	Events     int64    `json:"events"`
	// Snapshots pruned, across executions.
	Snapshots int `json:"snapshots"`
	// Messages moved out of inbox streams (TrimConsumedMessages).
	Messages int `json:"messages"`
	// InboxStreams deleted with the executions whose chain they served:
	// an execution that ended without continuing takes its chain's
	// streams with it (a continued one leaves them to its successor).
	InboxStreams int `json:"inboxStreams"`
	// Kept counts ended executions past the TTL that a branch ref keeps.
	KeptByRef int `json:"keptByRef"`
}

// ApplyRetention applies p to the runtime's stores; with dryRun it changes
// nothing and reports what it would delete. It pages every execution of
// the log (O(executions)): run it from a periodic job, not a hot path.
// Deleting needs an event store that is a store.ExecutionDeleter (and a
// store.SnapshotDeleter to drop the snapshots with it); pruning a
// store.SnapshotLister and store.SnapshotPruner: *NotConfiguredError when
// the policy asks for one the stores lack. With an Authorizer each
// deletion is a "delete".
func (rt *Runtime) ApplyRetention(ctx context.Context, p RetentionPolicy, dryRun bool) (RetentionReport, error) {
	rep := RetentionReport{DryRun: dryRun, Executions: []string{}}
	if err := p.Validate(); err != nil {
		return rep, err
	}
	deleter, canDelete := rt.cfg.Events.(store.ExecutionDeleter)
	if p.TerminalTTL > 0 && !canDelete {
		return rep, &NotConfiguredError{Field: "Events", Need: "a retention TTL (an event store that is a store.ExecutionDeleter)"}
	}
	lister, canList := rt.cfg.Snapshots.(store.SnapshotLister)
	pruner, canPrune := rt.cfg.Snapshots.(store.SnapshotPruner)
	if p.KeepSnapshots > 0 && (rt.cfg.Snapshots == nil || !canList || !canPrune) {
		return rep, &NotConfiguredError{Field: "Snapshots", Need: "snapshot pruning (a store.SnapshotLister and store.SnapshotPruner)"}
	}
	trimmer, canTrim := rt.cfg.Events.(store.PrefixTrimmer)
	if p.TrimConsumedMessages && (rt.cfg.Archive == nil || !canTrim) {
		return rep, &NotConfiguredError{Field: "Archive", Need: "trimming consumed messages (an archive and a store.PrefixTrimmer)"}
	}
	var archived store.ArchiveDeleter
	if p.DeleteArchived {
		var ok bool
		if archived, ok = rt.cfg.Archive.(store.ArchiveDeleter); !ok {
			return rep, &NotConfiguredError{Field: "Archive", Need: "deleteArchived (an archive that is a store.ArchiveDeleter)"}
		}
	}
	pinned, err := rt.pinnedByRefs(ctx)
	if err != nil {
		return rep, err
	}
	cutoff := rt.cfg.Clock.Now().Add(-p.TerminalTTL).UnixMilli()
	for after := ""; ; {
		page, err := rt.cfg.Events.ListExecutions(ctx, after, 256)
		if err != nil {
			return rep, err
		}
		for _, x := range page.Executions {
			if store.IsInboxStream(x.ExecutionID) || x.Length == 0 {
				continue
			}
			if p.TerminalTTL > 0 {
				expired, err := rt.endedBefore(ctx, x, cutoff)
				if err != nil {
					return rep, err
				}
				_, isPinned := pinned[x.ExecutionID]
				if expired && isPinned {
					rep.KeptByRef++
				} else if expired {
					streams, err := rt.chainStreams(ctx, x)
					if err != nil {
						return rep, err
					}
					if !dryRun {
						if err := rt.authorize(ctx, "delete", x.ExecutionID, "", true); err != nil {
							return rep, err
						}
						if err := rt.deleteExecution(ctx, deleter, archived, x.ExecutionID, streams); err != nil {
							return rep, err
						}
					}
					rep.InboxStreams += len(streams)
					rep.Executions = append(rep.Executions, x.ExecutionID)
					rep.Events += x.Length - rt.trimPoint(ctx, x.ExecutionID)
					continue
				}
			}
			if p.TrimConsumedMessages {
				n, err := rt.trimInbox(ctx, trimmer, x.ExecutionID, dryRun)
				if err != nil {
					return rep, err
				}
				rep.Messages += n
			}
			if p.KeepSnapshots > 0 {
				n, err := rt.pruneSnapshots(ctx, lister, pruner, x.ExecutionID, p.KeepSnapshots, dryRun)
				if err != nil {
					return rep, err
				}
				rep.Snapshots += n
			}
		}
		if after = page.Next; after == "" {
			return rep, nil
		}
	}
}

// pinnedByRefs maps each execution a branch ref points at to the first
// such ref's name.
func (rt *Runtime) pinnedByRefs(ctx context.Context) (map[string]string, error) {
	pinned := map[string]string{}
	if rt.cfg.Branches == nil {
		return pinned, nil
	}
	refs, err := rt.cfg.Branches.ListRefs(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("loom: listing branch refs: %w", err)
	}
	for _, r := range refs {
		if _, ok := pinned[r.ExecutionID]; !ok {
			pinned[r.ExecutionID] = r.Name
		}
	}
	return pinned, nil
}

// endedBefore says x's last event ends it and is older than cutoff.
func (rt *Runtime) endedBefore(ctx context.Context, x store.ExecutionInfo, cutoff int64) (bool, error) {
	last, err := store.ReadRange(ctx, rt.cfg.Events, x.ExecutionID, x.Length-1, x.Length)
	if err != nil || len(last) == 0 {
		return false, err
	}
	switch last[0].Type {
	case event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled, event.ExecutionContinued:
		return last[0].Timestamp < cutoff, nil
	}
	return false, nil
}

// chainStreams lists the inbox streams an expired execution takes with it
// when it is deleted: its chain's, unless it continued as new (its
// successor reads them on). Streams are keyed by the chain's first
// execution, in id order after their common prefix, so one short listing
// finds them.
func (rt *Runtime) chainStreams(ctx context.Context, x store.ExecutionInfo) ([]string, error) {
	// Whatever Features.Inbox says now: a runtime that wrote them may
	// have had it on.
	l, err := rt.load(ctx, x.ExecutionID)
	if err != nil {
		return nil, err
	}
	if l.state.Status == fold.StatusContinued {
		return nil, nil
	}
	prefix := streamID(chainOf(x.ExecutionID, l.state), "")
	var out []string
	for after := prefix; ; {
		page, err := rt.cfg.Events.ListExecutions(ctx, after, 256)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Executions {
			if !strings.HasPrefix(e.ExecutionID, prefix) {
				return out, nil
			}
			out = append(out, e.ExecutionID)
		}
		if after = page.Next; after == "" {
			return out, nil
		}
	}
}

// deleteExecution removes an ended execution's log, snapshots and the
// inbox streams it takes with it, and its archived history when archived
// is set (the snapshots, streams and archive first: a log without them is
// whole and the next pass deletes it, while a stream whose log is gone
// would be listed by nothing any more). The caller has authorized the
// "delete"; ApplyRetention and DeleteExecution share it.
func (rt *Runtime) deleteExecution(ctx context.Context, deleter store.ExecutionDeleter, archived store.ArchiveDeleter, id string, streams []string) error {
	for _, s := range streams {
		if err := deleter.DeleteExecution(ctx, s); err != nil {
			return fmt.Errorf("loom: deleting the inbox stream %q of %q: %w", s, id, err)
		}
	}
	if archived != nil {
		// Before the log: a crash in between leaves a log the next pass
		// deletes, never an archive nothing lists any more.
		if err := archived.DeleteArchived(ctx, id); err != nil {
			return fmt.Errorf("loom: deleting the archived history of %q: %w", id, err)
		}
	}
	if sd, ok := rt.cfg.Snapshots.(store.SnapshotDeleter); ok {
		if err := sd.DeleteExecution(ctx, id); err != nil {
			return fmt.Errorf("loom: deleting the snapshots of %q: %w", id, err)
		}
	}
	if err := deleter.DeleteExecution(ctx, id); err != nil {
		return fmt.Errorf("loom: deleting %q: %w", id, err)
	}
	return nil
}

// pruneSnapshots prunes id's snapshots to the latest keep, never below its
// compaction checkpoint, and returns how many it pruned (or would).
func (rt *Runtime) pruneSnapshots(ctx context.Context, lister store.SnapshotLister, pruner store.SnapshotPruner,
	id string, keep int, dryRun bool) (int, error) {
	seqs, err := lister.ListSequences(ctx, id)
	if err != nil || len(seqs) <= keep {
		return 0, err
	}
	below := seqs[len(seqs)-keep]
	if through := rt.trimPoint(ctx, id); through > 0 && through < below {
		below = through // the compaction checkpoint stands for the history
	}
	n := 0
	for _, s := range seqs {
		if s < below {
			n++
		}
	}
	if dryRun || n == 0 {
		return n, nil
	}
	pruned, err := pruner.Prune(ctx, id, below)
	if err != nil {
		return 0, fmt.Errorf("loom: retention: pruning the snapshots of %q below #%s: %w", id, strconv.FormatInt(below, 10), err)
	}
	return pruned, nil
}
