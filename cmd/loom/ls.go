package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/store"
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
// for the number of events, forkChain for the lineage.
type lsPage struct {
	Executions []inspect.Listing `json:"executions"`
	// Next is the --after of the next page (id order only).
	Next string `json:"next,omitempty"`
	// More counts the matching executions past --limit in another order.
	More int `json:"more,omitempty"`
}

func (c *cli) lsCommand() *cobra.Command {
	var (
		storeSpec, after, status, flow, sortBy, tenant string
		limit                                          int
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List executions with their folded status, a page at a time",
		Long: `ls lists the executions of a store with the status folded from each one's
latest snapshot and log tail. --status, --flow and --tenant filter; --limit and --after
page (the last line names the --after of the next page).

--sort orders the list: id (the default; pages with --after), updated (the
most recently updated first) or status (running, pending, suspended, failed,
cancelled, completed, continued; then by id). Sorting by updated or status
reads every execution of the store and shows the first --limit.

--json prints {executions: [{executionId, workflowId, length, status,
sequence, updatedAt, suspendedOn?, forkChain?}], next?, more?}: length is
the number of events, forkChain the fork lineage (as the state's _forkChain),
the same names as the inspector's API.`,
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
			return c.withStore(storeSpec, func(s *openedStore) error {
				return c.ls(s, lsQuery{after: after, limit: limit, status: fold.Status(status), flow: flow, tenant: tenant, sort: sortBy})
			})
		},
	}
	storeFlag(cmd, &storeSpec)
	cmd.Flags().IntVar(&limit, "limit", 50, "list at most `n` executions")
	cmd.Flags().StringVar(&after, "after", "", "start after this execution `id` (the cursor a previous page printed)")
	cmd.Flags().StringVar(&status, "status", "", "only executions with this `status` (suspended, completed…)")
	cmd.Flags().StringVar(&flow, "flow", "", "only executions of this flow `id`")
	cmd.Flags().StringVar(&tenant, "tenant", "", "only executions of this `tenant` (recorded with the starting principal)")
	cmd.Flags().StringVar(&sortBy, "sort", sortByID, "order by `key`: id, updated (newest first) or status")
	return cmd
}

// lsQuery is what ls was asked for.
type lsQuery struct {
	after, flow, tenant, sort string
	limit                     int
	status                    fold.Status
}

// ls scans the store page by page — until limit executions match in id
// order, to the end in another — folding each candidate's state.
func (c *cli) ls(s *openedStore, q lsQuery) error {
	prog := c.newProgress()
	defer prog.done()
	var page lsPage
	scanned := 0
	byID := q.sort == sortByID
scan:
	for cursor := q.after; ; {
		infos, err := s.Events.ListExecutions(c.ctx, cursor, max(q.limit, 200))
		if err != nil {
			return err
		}
		for i, info := range infos.Executions {
			scanned++
			prog.update("ls: %d executions scanned, %d listed", scanned, len(page.Executions))
			row, ok, err := c.listing(s, info, q)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			page.Executions = append(page.Executions, row)
			if byID && len(page.Executions) == q.limit {
				if i < len(infos.Executions)-1 || infos.Next != "" {
					page.Next = info.ExecutionID
				}
				break scan
			}
		}
		if infos.Next == "" {
			break
		}
		cursor = infos.Next
	}
	prog.done()
	if !byID {
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
	return c.printListings(page)
}

// listing folds one execution and says whether it passes the filters.
func (c *cli) listing(s *openedStore, info store.ExecutionInfo, q lsQuery) (inspect.Listing, bool, error) {
	if q.flow != "" && info.WorkflowID != q.flow {
		return inspect.Listing{}, false, nil
	}
	st, err := s.StateAt(c.ctx, info.ExecutionID, -1)
	if err != nil {
		return inspect.Listing{}, false, fmt.Errorf("folding %s: %w", info.ExecutionID, err)
	}
	if q.status != "" && st.Status != q.status {
		return inspect.Listing{}, false, nil
	}
	l := inspect.ListingOf(info, st)
	if q.tenant != "" && l.Tenant != q.tenant {
		return inspect.Listing{}, false, nil
	}
	return l, true, nil
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

func (c *cli) printListings(page lsPage) error {
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
		fmt.Fprintf(c.stdout, "More: loom ls --after %s (with the same --store and filters)\n", page.Next)
	case page.More > 0:
		fmt.Fprintf(c.stdout, "%d more match: raise --limit to see them\n", page.More)
	}
	return nil
}
