package loom

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Page sizes of List.
const (
	// DefaultListLimit is the store page List reads when ListQuery.Limit
	// is 0.
	DefaultListLimit = 50
	// MaxListLimit bounds ListQuery.Limit: a larger one reads a page of
	// MaxListLimit.
	MaxListLimit = 500
)

// maxListCursorBytes bounds ListQuery.After. A cursor is an execution id or
// an inbox stream id (which holds its chain's id and a topic), so it may be
// longer than one id.
const maxListCursorBytes = 4 * event.MaxIDBytes

// ListQuery asks List for one page of executions.
type ListQuery struct {
	// After is the cursor: list executions whose id sorts after it (the
	// Next of the previous page; "" for the first page).
	After string
	// Limit is how many executions of the store the page reads (default
	// DefaultListLimit, at most MaxListLimit; negative is refused).
	Limit int
	// FlowID, when set, keeps only the executions of that flow (the flow
	// the store's listing names).
	FlowID string
	// Status, when set, keeps only the executions whose folded status it
	// is; a value that is no fold.Status is refused.
	Status fold.Status
}

// ListPage is one page of List. Next is the After of the following page, ""
// on the last one.
type ListPage struct {
	Executions []ExecutionSummary `json:"executions"`
	Next       string             `json:"next,omitempty"`
}

// ExecutionSummary is one execution of a ListPage: the store's listing
// (executionId, workflowId, and length, the number of events in its log)
// and its latest durable folded state — status, sequence, startedAt and
// updatedAt, the gate it is parked on, its tenant (recorded with the
// starting principal), its parent link ({executionId, name}, a child's)
// and its fork lineage (the state's _forkChain), both as the fold holds
// them. The member names are those of the inspector's listing and of loom
// ls --json.
type ExecutionSummary struct {
	ExecutionID string          `json:"executionId"`
	WorkflowID  string          `json:"workflowId"`
	Length      int64           `json:"length"`
	Status      fold.Status     `json:"status"`
	Sequence    int64           `json:"sequence"`
	StartedAt   int64           `json:"startedAt,omitempty"`
	UpdatedAt   int64           `json:"updatedAt"`
	SuspendedOn string          `json:"suspendedOn,omitempty"`
	Tenant      string          `json:"tenant,omitempty"`
	Parent      json.RawMessage `json:"parent,omitempty"`
	ForkChain   json.RawMessage `json:"forkChain,omitempty"`
}

// ListQueryError refuses a ListQuery before anything is read. Field is the
// query member (after, limit, flowId or status: the names the wire ABI's
// execution.list takes) and Reason says what to send instead.
type ListQueryError struct {
	Field  string
	Reason string
}

func (e *ListQueryError) Error() string {
	return "loom: list: " + e.Field + ": " + e.Reason
}

// listStatuses are the statuses a ListQuery may filter on.
var listStatuses = []fold.Status{fold.StatusPending, fold.StatusRunning, fold.StatusSuspended, fold.StatusCompleted,
	fold.StatusFailed, fold.StatusCancelled, fold.StatusContinued}

// validate refuses a query List cannot serve and returns its page size.
func (q ListQuery) validate() (int, error) {
	switch {
	case q.Limit < 0:
		return 0, &ListQueryError{Field: "limit", Reason: "a negative page size; use 1 to " + strconv.Itoa(MaxListLimit) +
			", or 0 for the default " + strconv.Itoa(DefaultListLimit)}
	case len(q.After) > maxListCursorBytes || !utf8.ValidString(q.After):
		return 0, &ListQueryError{Field: "after", Reason: "not a cursor List returned; pass the next of the previous page, or nothing for the first page"}
	case q.Status != "" && !slices.Contains(listStatuses, q.Status):
		names := make([]string, len(listStatuses))
		for i, s := range listStatuses {
			names[i] = string(s)
		}
		return 0, &ListQueryError{Field: "status", Reason: "not a status; use one of " + strings.Join(names, ", ") +
			" (names are lower-case), or nothing for any"}
	}
	if q.FlowID != "" {
		if err := event.ValidateID("flowId", q.FlowID); err != nil {
			return 0, &ListQueryError{Field: "flowId", Reason: "not a flow id (" + err.Error() + "); pass a registered flow's id, or nothing for any"}
		}
	}
	switch {
	case q.Limit == 0:
		return DefaultListLimit, nil
	case q.Limit > MaxListLimit:
		return MaxListLimit, nil
	}
	return q.Limit, nil
}

// List returns one page of the executions in the runtime's event store, in
// id order after q.After, each with its latest durable folded state
// (snapshot plus tail, as a resume loads it). It reads q.Limit entries of
// the store's listing and keeps those that pass the filters, so a page may
// hold fewer executions than q.Limit — none, even — while Next is set: Next
// always continues exactly where that store page ended, and paging until
// Next is "" visits every execution once. Inbox streams are not
// executions and are never listed.
//
// A caller whose principal names a tenant (WithPrincipal) sees only its
// tenant's executions. With a Config.Authorizer each execution is
// authorized as a "list" (the Authorizer sees its recorded tenant), and a
// denied one is left out of the page. Listing records nothing, a denial
// included: no EXECUTION_DENIED, no append of any kind. An invalid query is
// refused with *ListQueryError before anything is read; an execution
// deleted while the page is read is left out.
func (rt *Runtime) List(ctx context.Context, q ListQuery) (ListPage, error) {
	limit, err := q.validate()
	if err != nil {
		return ListPage{}, err
	}
	listed, err := rt.cfg.Events.ListExecutions(ctx, q.After, limit)
	if err != nil {
		return ListPage{}, err
	}
	page := ListPage{Executions: []ExecutionSummary{}, Next: listed.Next}
	scope, principal := callerTenant(ctx), principalOf(ctx)
	for _, info := range listed.Executions {
		if store.IsInboxStream(info.ExecutionID) || info.Length == 0 || (q.FlowID != "" && info.WorkflowID != q.FlowID) {
			continue
		}
		l, err := rt.load(ctx, info.ExecutionID)
		if errors.Is(err, ErrExecutionNotFound) {
			continue // deleted since the store listed it
		}
		if err != nil {
			return ListPage{}, err
		}
		row := summaryOf(info, l.state)
		if (scope != "" && row.Tenant != scope) || (q.Status != "" && row.Status != q.Status) {
			continue
		}
		if a := rt.cfg.Authorizer; a != nil {
			req := AuthzRequest{Action: "list", ExecutionID: row.ExecutionID, FlowID: row.WorkflowID, Tenant: row.Tenant, Principal: principal}
			if a.Authorize(ctx, req) != nil {
				continue // left out, and nothing recorded
			}
		}
		page.Executions = append(page.Executions, row)
	}
	return page, nil
}

// summaryOf is the summary of an execution the store listed as info, whose
// latest folded state is st.
func summaryOf(info store.ExecutionInfo, st fold.State) ExecutionSummary {
	s := ExecutionSummary{ExecutionID: info.ExecutionID, WorkflowID: info.WorkflowID, Length: info.Length,
		Status: st.Status, Sequence: st.Sequence, StartedAt: st.StartedAt, UpdatedAt: st.UpdatedAt, Tenant: store.TenantOfPrincipal(st.Variables.Principal),
		Parent: st.Variables.Parent, ForkChain: st.Variables.ForkChain}
	if st.Status == fold.StatusSuspended && st.Variables.SuspendedOn != nil {
		s.SuspendedOn = st.Variables.SuspendedOn.On
	}
	return s
}
