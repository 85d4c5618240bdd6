package memstore

import (
	"context"

	"github.com/loom-kernel/loom/store"
)

var _ store.StatusIndex = (*EventStore)(nil)

// unfinished is one execution's entry in the status index. A continued
// execution keeps its entry once its successor has events, unlisted, so
// deleting the successor lists it again.
type unfinished struct {
	status  store.UnfinishedStatus
	seq, ts int64
	next    string // the successor of a continued execution
	listed  bool
	log     *execLog // the execution's log, for its workflow id
}

// statusIndex is the EventStore's store.StatusIndex, guarded by its mutex
// and changed in the same critical section as the log it indexes.
//
// Entries are keyed by execution id; successors maps the successor id of
// each continued entry to its predecessors, so creating or deleting a log
// finds the entries it lists or unlists without a scan; order keeps the
// listed ids in code-point order like the listing's own index, so a page
// costs a binary search plus its own length.
type statusIndex struct {
	entries    map[string]*unfinished
	successors map[string]map[string]struct{}
	order      executionIndex
}

func newStatusIndex() statusIndex {
	return statusIndex{entries: make(map[string]*unfinished), successors: make(map[string]map[string]struct{})}
}

// apply records change for executionID, whose log is log. created says the
// log was empty before these events, which unlists the continued entries
// waiting for it as their successor. Callers hold the write lock and have
// left inbox streams out.
func (x *statusIndex) apply(executionID string, log *execLog, change store.StatusChange, created bool, logs map[string]*execLog) {
	if created {
		x.relist(executionID, false)
	}
	switch change.Move {
	case store.StatusEnded:
		x.remove(executionID)
	case store.StatusSet:
		x.set(executionID, log, change, logs)
	}
}

// set makes change the entry of executionID.
func (x *statusIndex) set(executionID string, log *execLog, change store.StatusChange, logs map[string]*execLog) {
	e := x.entries[executionID]
	if e == nil {
		e = &unfinished{log: log}
		x.entries[executionID] = e
	}
	x.unlinkSuccessor(executionID, e)
	wasListed := e.listed
	e.status, e.seq, e.ts, e.next = change.Status, change.Sequence, change.Timestamp, change.Next
	e.listed = true
	if change.Status == store.UnfinishedContinued {
		preds := x.successors[e.next]
		if preds == nil {
			preds = make(map[string]struct{})
			x.successors[e.next] = preds
		}
		preds[executionID] = struct{}{}
		if next := logs[e.next]; next != nil && len(next.events) > 0 {
			e.listed = false
		}
	}
	if e.listed && !wasListed {
		x.order.add(executionID)
	}
	if !e.listed && wasListed {
		x.order.markDirty()
	}
}

// remove drops the entry of executionID.
func (x *statusIndex) remove(executionID string) {
	e := x.entries[executionID]
	if e == nil {
		return
	}
	x.unlinkSuccessor(executionID, e)
	delete(x.entries, executionID)
	if e.listed {
		x.order.markDirty()
	}
}

// unlinkSuccessor forgets that e, the entry of executionID, waits for a
// successor.
func (x *statusIndex) unlinkSuccessor(executionID string, e *unfinished) {
	if e.status != store.UnfinishedContinued {
		return
	}
	if preds := x.successors[e.next]; preds != nil {
		delete(preds, executionID)
		if len(preds) == 0 {
			delete(x.successors, e.next)
		}
	}
}

// relist lists (listed true: successor deleted) or unlists (false:
// successor created) the continued entries whose successor is successor.
func (x *statusIndex) relist(successor string, listed bool) {
	for pred := range x.successors[successor] { //loom:order-independent each entry on its own
		e := x.entries[pred]
		if e == nil || e.listed == listed {
			continue
		}
		e.listed = listed
		if listed {
			x.order.add(pred)
		} else {
			x.order.markDirty()
		}
	}
}

// isListed reports whether id has a listed entry. Callers hold mu.
func (x *statusIndex) isListed(id string) bool {
	e, ok := x.entries[id]
	return ok && e.listed
}

// ListUnfinished implements store.StatusIndex: up to limit listed entries
// (DefaultListLimit when limit <= 0) whose id sorts after after in
// code-point order, from an ordered index of the listed ids, so a page
// costs a binary search plus its own length and never a pass over every
// execution. Next is the last id returned when more follow, "" on the last
// page. Entries change with the log under the same lock, so a page shows
// the index as of one moment; executions that become unfinished while a
// caller pages appear iff they sort after its cursor.
func (s *EventStore) ListUnfinished(ctx context.Context, after string, limit int) (store.UnfinishedPage, error) {
	if err := s.usable(ctx); err != nil {
		return store.UnfinishedPage{}, err
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	s.mu.RLock()
	if s.status.order.dirty {
		// Merging the index needs the write lock; take it for this page only.
		s.mu.RUnlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed.Load() {
			return store.UnfinishedPage{}, store.ErrClosed
		}
		s.status.order.refresh(s.status.isListed)
	} else {
		defer s.mu.RUnlock()
		if s.closed.Load() {
			return store.UnfinishedPage{}, store.ErrClosed
		}
	}
	ids, more := s.status.order.page(after, limit, s.status.isListed)
	page := store.UnfinishedPage{Executions: make([]store.UnfinishedExecution, 0, len(ids))}
	for _, id := range ids {
		e := s.status.entries[id]
		page.Executions = append(page.Executions, store.UnfinishedExecution{
			ExecutionID: id, WorkflowID: e.log.workflowID, Status: e.status,
			Sequence: e.seq, Timestamp: e.ts, NextExecutionID: e.next,
		})
	}
	if more {
		page.Next = ids[len(ids)-1]
	}
	return page, nil
}
