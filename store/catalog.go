package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
)

// ExecutionCatalogSPIVersion versions the ExecutionCatalog capability and
// the rule of CatalogStatusOf that decides its entries' status.
const ExecutionCatalogSPIVersion = "1.0.0"

// CatalogStatus is an execution's status as its catalog entry holds it:
// the fold's status names (fold.Status), set by the rule of
// CatalogStatusOf.
type CatalogStatus string

// Catalog statuses: the fold's statuses.
const (
	CatalogPending   CatalogStatus = "pending"
	CatalogRunning   CatalogStatus = "running"
	CatalogSuspended CatalogStatus = "suspended"
	CatalogCompleted CatalogStatus = "completed"
	CatalogFailed    CatalogStatus = "failed"
	CatalogCancelled CatalogStatus = "cancelled"
	CatalogContinued CatalogStatus = "continued"
)

// CatalogStatuses lists every CatalogStatus, in the fold's order.
var CatalogStatuses = []CatalogStatus{CatalogPending, CatalogRunning, CatalogSuspended,
	CatalogCompleted, CatalogFailed, CatalogCancelled, CatalogContinued}

// Valid reports whether s is one of CatalogStatuses.
func (s CatalogStatus) Valid() bool {
	for _, c := range CatalogStatuses {
		if s == c {
			return true
		}
	}
	return false
}

// CatalogStatusOf returns the status e sets on its execution's catalog
// entry, and false when e moves no status, by the fold's rule
// (fold/handlers_execution.go): EXECUTION_STARTED and EXECUTION_RESUMED set
// running, EXECUTION_SUSPENDED suspended, EXECUTION_COMPLETED,
// EXECUTION_FAILED and EXECUTION_CANCELLED their own status, a
// kernel-stamped EXECUTION_CONTINUED continued; every other event (a
// CONTINUED without the kernel stamp, EXECUTION_RECOVERED and
// EXECUTION_MIGRATED included) keeps it. A log whose events set none is
// pending. The catalog is an index, not a fold: for a log the kernel
// never writes (a second start, a resume after the end) it may disagree
// with the fold, and a caller showing a status re-folds the log.
func CatalogStatusOf(e event.Envelope) (CatalogStatus, bool) {
	switch e.Type {
	case event.ExecutionStarted, event.ExecutionResumed:
		return CatalogRunning, true
	case event.ExecutionSuspended:
		return CatalogSuspended, true
	case event.ExecutionCompleted:
		return CatalogCompleted, true
	case event.ExecutionFailed:
		return CatalogFailed, true
	case event.ExecutionCancelled:
		return CatalogCancelled, true
	case event.ExecutionContinued:
		if e.Kernel() {
			return CatalogContinued, true
		}
	}
	return "", false
}

// CatalogChange is what a batch of events does to its execution's catalog
// entry: the last status it sets, with the timestamp of the event that
// set it (Moved false: the batch sets none).
type CatalogChange struct {
	Moved    bool
	Status   CatalogStatus
	StatusAt int64
}

// CatalogChangeOf folds a batch by CatalogStatusOf: its last
// status-moving event decides.
func CatalogChangeOf(events []event.Envelope) CatalogChange {
	var c CatalogChange
	for _, e := range events {
		if s, ok := CatalogStatusOf(e); ok {
			c = CatalogChange{Moved: true, Status: s, StatusAt: e.Timestamp}
		}
	}
	return c
}

// CatalogEntry is one execution in an ExecutionCatalog.
type CatalogEntry struct {
	ExecutionID string `json:"executionId"`
	// WorkflowID is the one ListExecutions reports for the execution.
	WorkflowID string `json:"workflowId"`
	// Tenant is TenantOf the first event: "" for none.
	Tenant string        `json:"tenant,omitempty"`
	Status CatalogStatus `json:"status"`
	// StartedAt is the recorded timestamp of the first event (sequence 0).
	StartedAt int64 `json:"startedAt"`
	// StatusAt is the recorded timestamp of the event that set Status;
	// StartedAt for a pending entry.
	StatusAt int64 `json:"statusAt"`
}

// EntryOf is the catalog entry of a log whose first event is first,
// stored under executionID, before any event moves its status. Its
// WorkflowID is first's; a store whose listing takes another (the first
// non-empty one of the batch) sets its listing's, so the two agree.
func EntryOf(executionID string, first event.Envelope) CatalogEntry {
	e := CatalogEntry{ExecutionID: executionID, WorkflowID: first.WorkflowID, Tenant: TenantOf(first),
		Status: CatalogPending, StartedAt: first.Timestamp, StatusAt: first.Timestamp}
	return e
}

// Apply is the entry after a batch's change.
func (e CatalogEntry) Apply(c CatalogChange) CatalogEntry {
	if c.Moved {
		e.Status, e.StatusAt = c.Status, c.StatusAt
	}
	return e
}

// Catalog limits.
const (
	// DefaultCatalogLimit is the page size of a search with Limit < 1.
	DefaultCatalogLimit = 50
	// MaxCatalogLimit is the largest page a search returns: a larger
	// Limit is lowered to it.
	MaxCatalogLimit = 1000
)

// CatalogQuery selects catalog entries: those whose id starts with Prefix,
// of flow WorkflowID, of Tenant and of Status, each "" for any (Tenant ""
// is any tenant, not "no tenant"). A search orders them newest start
// first — StartedAt descending, then ExecutionID ascending — a page at a
// time: After is the Next of the previous page ("" for the first), Limit
// the page size (DefaultCatalogLimit when < 1, at most MaxCatalogLimit).
type CatalogQuery struct {
	Prefix     string        `json:"prefix,omitempty"`
	WorkflowID string        `json:"workflowId,omitempty"`
	Tenant     string        `json:"tenant,omitempty"`
	Status     CatalogStatus `json:"status,omitempty"`
	After      string        `json:"after,omitempty"`
	Limit      int           `json:"limit,omitempty"`
}

// CatalogPage is one page of a search: its entries, and Next, the cursor
// of the page after it, "" exactly on the page that ends the result. An
// entry is on exactly one page of a walk, whatever is appended meanwhile:
// the order's keys (StartedAt, ExecutionID) never change once an entry
// exists, and an execution created during the walk is on a later page iff
// it sorts after the cursor.
type CatalogPage struct {
	Entries []CatalogEntry `json:"entries"`
	Next    string         `json:"next,omitempty"`
}

// CatalogCounts is a count of entries by status; a status with none is
// absent.
type CatalogCounts map[CatalogStatus]int64

// ExecutionCatalog is an optional EventStore capability: the catalog of
// every execution (inbox streams left out) with its flow, tenant, start
// time and status, searchable newest first and countable by status, so a
// console's list of 100,000 executions costs a page, not a pass. The store
// keeps it in the same transaction as every write to the log (Append,
// AppendFenced, CopyPrefix, DeleteExecution): an entry is created by the
// first batch of a log (EntryOf) and moved only by a batch that moves the
// status (CatalogChangeOf) — a step event costs nothing — and a refused
// write changes it no more than the log. A copy (CopyPrefix) gets the
// entry of its prefix; a deleted log has none.
type ExecutionCatalog interface {
	// SearchExecutions returns one page of the entries q selects, in its
	// order. A malformed q (see ValidateCatalogQuery) is refused with
	// *InvalidCatalogQueryError before anything is read.
	SearchExecutions(ctx context.Context, q CatalogQuery) (CatalogPage, error)
	// CountExecutions counts the entries q selects, by status; q's
	// Status, After and Limit are ignored (every status is counted).
	CountExecutions(ctx context.Context, q CatalogQuery) (CatalogCounts, error)
}

// ErrNoCatalog matches the refusal of a store that implements
// ExecutionCatalog but holds none for what it stores (a read-only view of
// a file written before it had one): a reader falls back to
// ListExecutions.
var ErrNoCatalog = errors.New("store: no execution catalog")

// InvalidCatalogQueryError refuses a catalog query: Field names its member
// and Reason says what to do. Nothing was read.
type InvalidCatalogQueryError struct {
	Field  string
	Reason string
}

func (e *InvalidCatalogQueryError) Error() string {
	return "store: catalog query " + e.Field + ": " + e.Reason
}

// ValidateCatalogQuery checks q before a store reads anything: Status
// must be "" or a CatalogStatus, the strings valid UTF-8 without NUL, and
// After "" or a cursor a search returned.
func ValidateCatalogQuery(q CatalogQuery) error {
	for _, f := range []struct{ name, v string }{{"prefix", q.Prefix}, {"workflowId", q.WorkflowID}, {"tenant", q.Tenant}} {
		if !utf8.ValidString(f.v) || strings.ContainsRune(f.v, 0) {
			return &InvalidCatalogQueryError{Field: f.name, Reason: "must be valid UTF-8 without NUL"}
		}
	}
	if q.Status != "" && !q.Status.Valid() {
		return &InvalidCatalogQueryError{Field: "status", Reason: fmt.Sprintf("%q is no status: use one of %v, or none for any", q.Status, CatalogStatuses)}
	}
	if q.After != "" {
		if _, _, err := ParseCatalogCursor(q.After); err != nil {
			return err
		}
	}
	return nil
}

// CatalogLimit is the page size a store serves for limit.
func CatalogLimit(limit int) int {
	if limit < 1 {
		return DefaultCatalogLimit
	}
	return min(limit, MaxCatalogLimit)
}

// CatalogCursor is the cursor of the page after an entry: its StartedAt
// and id, so a store resumes the order from it.
func CatalogCursor(e CatalogEntry) string {
	return strconv.FormatInt(e.StartedAt, 10) + ":" + e.ExecutionID
}

// ParseCatalogCursor reads a cursor CatalogCursor made, refusing another
// string with *InvalidCatalogQueryError.
func ParseCatalogCursor(cursor string) (startedAt int64, executionID string, err error) {
	ts, id, ok := strings.Cut(cursor, ":")
	n, perr := strconv.ParseInt(ts, 10, 64)
	if !ok || perr != nil || id == "" || !utf8.ValidString(id) || strings.ContainsRune(id, 0) {
		return 0, "", &InvalidCatalogQueryError{Field: "after", Reason: "is not a cursor a search returned: pass the Next of the previous page, or none for the first"}
	}
	return n, id, nil
}

// CatalogBefore reports whether entry a comes before b in a search's
// order: newer start first, then id in code-point order.
func CatalogBefore(aStarted int64, aID string, bStarted int64, bID string) bool {
	if aStarted != bStarted {
		return aStarted > bStarted
	}
	return aID < bID
}

// Matches reports whether q selects e (Prefix, WorkflowID, Tenant and
// Status; not the page).
func (q CatalogQuery) Matches(e CatalogEntry) bool {
	return strings.HasPrefix(e.ExecutionID, q.Prefix) && (q.WorkflowID == "" || e.WorkflowID == q.WorkflowID) &&
		(q.Tenant == "" || e.Tenant == q.Tenant) && (q.Status == "" || e.Status == q.Status)
}

// PrefixEnd is the least string above every string that starts with
// prefix: prefix with its last rune replaced by the next one (a last
// U+10FFFF dropped, and the rune before it advanced), so it is valid
// UTF-8. false: no string above them all exists (prefix is all
// U+10FFFF), and the range has no end. A store serving
// CatalogQuery.Prefix as an id range reads from prefix up to it.
func PrefixEnd(prefix string) (string, bool) {
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF:
			r = 0xE000 // past the surrogates, which UTF-8 cannot hold
		default:
			r++
		}
		return prefix + string(r), true
	}
	return "", false
}
