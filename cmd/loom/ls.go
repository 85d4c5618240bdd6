package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/wire"
)

// forkLink is one entry of _forkChain.
type forkLink struct {
	ExecutionID string `json:"executionId"`
	Sequence    int64  `json:"sequence"`
	Simulate    bool   `json:"simulate,omitempty"`
}

// lastFork returns the parent link of a fork chain, nil for none.
func lastFork(chain json.RawMessage) *forkLink {
	var links []forkLink
	if len(chain) == 0 || json.Unmarshal(chain, &links) != nil || len(links) == 0 {
		return nil
	}
	return &links[len(links)-1]
}

var statuses = []fold.Status{fold.StatusPending, fold.StatusRunning, fold.StatusSuspended, fold.StatusCompleted,
	fold.StatusFailed, fold.StatusCancelled, fold.StatusContinued}

// The orders of loom ls --sort.
const (
	sortByID      = "id"
	sortByUpdated = "updated"
	sortByStatus  = "status"
)

// statusOrder is --sort status's order: what needs attention first
// (running, pending, parked, failed), then what ended well.
var statusOrder = []fold.Status{fold.StatusRunning, fold.StatusPending, fold.StatusSuspended, fold.StatusFailed,
	fold.StatusCancelled, fold.StatusCompleted, fold.StatusContinued}

// lsPage is what ls prints with --json: the inspector's listing shape
// (/api/executions), so both name the same things the same way — length
// for the number of events, forkChain for the lineage — as the wire ABI's
// execution.list does.
type lsPage struct {
	Executions []inspect.Listing `json:"executions"`
	// Next is the --after of the next page (id order only).
	Next string `json:"next,omitempty"`
	// More counts the matching executions past --limit in another order.
	More int `json:"more,omitempty"`
}

func (c *cli) lsCommand() *cobra.Command {
	var (
		r                                              remote
		storeSpec, after, status, flow, sortBy, tenant string
		limit                                          int
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List executions with their folded status, a page at a time",
		Long: `ls lists the executions of a store (--store) or of a running app (--addr and
--token, through the wire ABI's execution.list) with the status folded from
each one's latest snapshot and log tail; give exactly one of --store and
--addr. Over the wire the app decides what the caller sees: a token whose
principal names a tenant lists that tenant's executions only, and the app's
authorizer leaves out what it denies. --status, --flow and --tenant filter;
--limit and --after page (the last line names the --after of the next page).
Inbox streams are not executions and are never listed.

--sort orders the list: id (the default; pages with --after), updated (the
most recently updated first) or status (running, pending, suspended, failed,
cancelled, completed, continued; then by id). Sorting by updated or status
reads every execution and shows the first --limit. Reading many pages shows
progress on stderr (--progress).

--json prints {executions: [{executionId, workflowId, length, status,
sequence, updatedAt, suspendedOn?, forkChain?, parent?, tenant?}], next?,
more?}: length is the number of events, forkChain the fork lineage (as the
state's _forkChain), the same names as the inspector's API and the wire
ABI's execution.list. Both modes print the same.`,
		Args: c.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usagef("--limit must be 1 or more")
			}
			if status != "" && !slices.Contains(statuses, fold.Status(status)) {
				return usagef("--status %q is not a status; use one of %v", status, statuses)
			}
			switch sortBy {
			case sortByID:
			case sortByUpdated, sortByStatus:
				if after != "" {
					return usagef("--after pages in id order only: drop it, or use --sort id")
				}
			default:
				return usagef("--sort is id, updated or status, not %q", sortBy)
			}
			q := lsQuery{after: after, limit: limit, status: fold.Status(status), flow: flow, tenant: tenant, sort: sortBy}
			wireMode, err := lsMode(cmd)
			if err != nil {
				return err
			}
			if wireMode {
				cl, err := r.client()
				if err != nil {
					return err
				}
				return c.ls(q, c.wireListings(&r, cl, q))
			}
			return c.withStore(storeSpec, func(s *openedStore) error { return c.ls(q, c.storeListings(s, q)) })
		},
	}
	storeFlag(cmd, &storeSpec)
	r.flags(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "list at most `n` executions")
	cmd.Flags().StringVar(&after, "after", "", "start after this execution `id` (the cursor a previous page printed)")
	cmd.Flags().StringVar(&status, "status", "", "only executions with this `status` (suspended, completed…)")
	cmd.Flags().StringVar(&flow, "flow", "", "only executions of this flow `id`")
	cmd.Flags().StringVar(&tenant, "tenant", "", "only executions of this `tenant` (recorded with the starting principal)")
	cmd.Flags().StringVar(&sortBy, "sort", sortByID, "order by `key`: id, updated (newest first) or status")
	return cmd
}

// lsMode says whether ls asks an app (--addr) rather than reads a store
// (--store): exactly one of the flags, or without either exactly one of
// $LOOM_STORE and $LOOM_ADDR.
func lsMode(cmd *cobra.Command) (wireMode bool, err error) {
	storeSet, addrSet := cmd.Flags().Changed("store"), cmd.Flags().Changed("addr")
	if !storeSet && !addrSet {
		storeSet, addrSet = os.Getenv("LOOM_STORE") != "", os.Getenv("LOOM_ADDR") != ""
		if storeSet && addrSet {
			return false, usagef("LOOM_STORE and LOOM_ADDR are both set: pass --store to read the store, or --addr (with --token) to ask the running app")
		}
	}
	switch {
	case storeSet && addrSet:
		return false, usagef("--store and --addr both given: pass --store to read a store, or --addr (with --token) to ask a running app, not both")
	case !storeSet && !addrSet:
		return false, usagef("--store is required to read a store (a SQLite file or a PostgreSQL DSN), or --addr <host:port> " +
			"(with --token) to ask a running app instead; or set LOOM_STORE or LOOM_ADDR")
	}
	return addrSet, nil
}

// lsQuery is what ls was asked for.
type lsQuery struct {
	after, flow, tenant, sort string
	limit                     int
	status                    fold.Status
}

// lsSource reads one page of listings after a cursor, --flow and --status
// applied within it, and the cursor of the next page ("" after the last);
// seen is how many executions it looked at (a store's) or received (an
// app's).
type lsSource struct {
	// from names the mode's flag in the hint to the next page; seen says
	// what the progress counts.
	from, seen string
	page       func(after string) (rows []inspect.Listing, next string, seen int, err error)
}

// storeListings pages the store itself, folding each execution.
func (c *cli) storeListings(s *openedStore, q lsQuery) lsSource {
	return lsSource{from: "--store", seen: "scanned", page: func(after string) ([]inspect.Listing, string, int, error) {
		infos, err := s.Events.ListExecutions(c.ctx, after, max(q.limit, 200))
		if err != nil {
			return nil, "", 0, err
		}
		var rows []inspect.Listing
		for _, info := range infos.Executions {
			row, ok, err := c.listing(s, info, q)
			if err != nil {
				return nil, "", 0, err
			}
			if ok {
				rows = append(rows, row)
			}
		}
		return rows, infos.Next, len(infos.Executions), nil
	}}
}

// wireListings pages the app's execution.list, each page within --timeout.
func (c *cli) wireListings(r *remote, cl *wire.Client, q lsQuery) lsSource {
	return lsSource{from: "--addr", seen: "received from the app", page: func(after string) ([]inspect.Listing, string, int, error) {
		ctx, cancel := r.call(c)
		defer cancel()
		res, err := cl.List(ctx, wire.ListParams{After: after, Limit: min(max(q.limit, 200), loom.MaxListLimit), FlowID: q.flow, Status: q.status})
		if err != nil {
			return nil, "", 0, r.reach(err)
		}
		rows := make([]inspect.Listing, 0, len(res.Executions))
		for _, x := range res.Executions {
			rows = append(rows, inspect.Listing{ExecutionInfo: store.ExecutionInfo{ExecutionID: x.ExecutionID, WorkflowID: x.WorkflowID, Length: x.Length},
				Status: x.Status, Sequence: x.Sequence, StartedAt: x.StartedAt, UpdatedAt: x.UpdatedAt, SuspendedOn: x.SuspendedOn, ForkChain: x.ForkChain,
				Parent: x.Parent, Tenant: x.Tenant})
		}
		return rows, res.Next, len(res.Executions), nil
	}}
}

// ls pages src — until limit executions match in id order, to the end in
// another — and prints what matched.
func (c *cli) ls(q lsQuery, src lsSource) error {
	page, err := c.lsScan(q, src)
	if err != nil {
		return err
	}
	if q.sort != sortByID {
		sortListings(page.Executions, q.sort)
		if n := len(page.Executions) - q.limit; n > 0 {
			page.Executions, page.More = page.Executions[:q.limit], n
		}
	}
	if c.json {
		if page.Executions == nil {
			page.Executions = []inspect.Listing{}
		}
		return c.printJSON(page)
	}
	return c.printListings(page, src.from)
}

// lsScan collects the matching listings, page by page, showing progress.
func (c *cli) lsScan(q lsQuery, src lsSource) (lsPage, error) {
	prog := c.newProgress()
	defer prog.done()
	var page lsPage
	seen, pages := 0, 0
	for cursor := q.after; ; {
		rows, next, n, err := src.page(cursor)
		if err != nil {
			return lsPage{}, err
		}
		seen, pages = seen+n, pages+1
		prog.update("ls: %d executions %s in %d page(s), %d listed", seen, src.seen, pages, len(page.Executions))
		for i, row := range rows {
			if q.tenant != "" && row.Tenant != q.tenant {
				continue
			}
			page.Executions = append(page.Executions, row)
			if q.sort == sortByID && len(page.Executions) == q.limit {
				if i < len(rows)-1 || next != "" {
					page.Next = row.ExecutionID
				}
				return page, nil
			}
		}
		if next == "" {
			return page, nil
		}
		cursor = next
	}
}

// listing folds one execution and says whether it passes --flow and
// --status (--tenant is lsScan's, for both modes); an inbox stream is no
// execution.
func (c *cli) listing(s *openedStore, info store.ExecutionInfo, q lsQuery) (inspect.Listing, bool, error) {
	if store.IsInboxStream(info.ExecutionID) || (q.flow != "" && info.WorkflowID != q.flow) {
		return inspect.Listing{}, false, nil
	}
	st, err := s.StateAt(c.ctx, info.ExecutionID, -1)
	if err != nil {
		return inspect.Listing{}, false, fmt.Errorf("folding %s: %w", info.ExecutionID, err)
	}
	if q.status != "" && st.Status != q.status {
		return inspect.Listing{}, false, nil
	}
	return inspect.ListingOf(info, st), true, nil
}

// sortListings orders rows by updated time (newest first) or by status.
func sortListings(rows []inspect.Listing, by string) {
	slices.SortStableFunc(rows, func(a, b inspect.Listing) int {
		if by == sortByUpdated {
			return cmp.Or(cmp.Compare(b.UpdatedAt, a.UpdatedAt), strings.Compare(a.ExecutionID, b.ExecutionID))
		}
		return cmp.Or(cmp.Compare(slices.Index(statusOrder, a.Status), slices.Index(statusOrder, b.Status)),
			strings.Compare(a.ExecutionID, b.ExecutionID))
	})
}

func (c *cli) printListings(page lsPage, from string) error {
	if len(page.Executions) == 0 {
		fmt.Fprintln(c.stdout, "No executions match.")
		return nil
	}
	t := newTable(c.stdout, "EXECUTION", "FLOW", "STATUS", "EVENTS", "UPDATED", "NOTE")
	for _, r := range page.Executions {
		note := ""
		if r.SuspendedOn != "" {
			note = "parked on " + r.SuspendedOn
		}
		if link := lastFork(r.ForkChain); link != nil {
			if note != "" {
				note += "; "
			}
			note += fmt.Sprintf("fork of %s at #%d", link.ExecutionID, link.Sequence)
			if link.Simulate {
				note += " (simulation)"
			}
		}
		t.row(r.ExecutionID, r.WorkflowID, string(r.Status), strconv.FormatInt(r.Length, 10), stamp(r.UpdatedAt), note)
	}
	if err := t.flush(); err != nil {
		return err
	}
	switch {
	case page.Next != "":
		fmt.Fprintf(c.stdout, "More: loom ls --after %s (with the same %s and filters)\n", page.Next, from)
	case page.More > 0:
		fmt.Fprintf(c.stdout, "%d more match: raise --limit to see them\n", page.More)
	}
	return nil
}
