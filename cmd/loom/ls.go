package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/fold"
)

// lsRow is one execution of loom ls.
type lsRow struct {
	ExecutionID string          `json:"executionId"`
	WorkflowID  string          `json:"workflowId"`
	Status      fold.Status     `json:"status"`
	Events      int64           `json:"events"`
	UpdatedAt   int64           `json:"updatedAt"`
	SuspendedOn string          `json:"suspendedOn,omitempty"`
	ForkOf      *forkLink       `json:"forkOf,omitempty"`
	ForkChain   json.RawMessage `json:"-"`
}

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

func (c *cli) lsCommand() *cobra.Command {
	var (
		storeSpec, after, status, flow string
		limit                          int
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List executions with their folded status, a page at a time",
		Long: `ls lists the executions of a store in id order, with the status folded from
each one's latest snapshot and log tail. --status and --flow filter; --limit
and --after page (the last line names the --after of the next page).`,
		Args: c.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usagef("--limit must be 1 or more")
			}
			if status != "" && !slices.Contains(statuses, fold.Status(status)) {
				return usagef("--status %q is not a status; use one of %v", status, statuses)
			}
			return c.withStore(storeSpec, func(s *openedStore) error { return c.ls(s, after, limit, fold.Status(status), flow) })
		},
	}
	storeFlag(cmd, &storeSpec)
	cmd.Flags().IntVar(&limit, "limit", 50, "list at most `n` executions")
	cmd.Flags().StringVar(&after, "after", "", "start after this execution `id` (the cursor a previous page printed)")
	cmd.Flags().StringVar(&status, "status", "", "only executions with this `status` (suspended, completed…)")
	cmd.Flags().StringVar(&flow, "flow", "", "only executions of this flow `id`")
	return cmd
}

// ls scans the store page by page until limit executions match, folding
// each candidate's state only when a status filter needs it or to show it.
func (c *cli) ls(s *openedStore, after string, limit int, status fold.Status, flow string) error {
	prog := c.newProgress()
	defer prog.done()
	var rows []lsRow
	next, scanned := "", 0
scan:
	for cursor := after; ; {
		page, err := s.Events.ListExecutions(c.ctx, cursor, max(limit, 200))
		if err != nil {
			return err
		}
		for i, info := range page.Executions {
			scanned++
			prog.update("ls: %d executions scanned, %d listed", scanned, len(rows))
			if flow != "" && info.WorkflowID != flow {
				continue
			}
			st, err := s.StateAt(c.ctx, info.ExecutionID, -1)
			if err != nil {
				return fmt.Errorf("folding %s: %w", info.ExecutionID, err)
			}
			if status != "" && st.Status != status {
				continue
			}
			row := lsRow{ExecutionID: info.ExecutionID, WorkflowID: info.WorkflowID, Status: st.Status,
				Events: st.Sequence + 1, UpdatedAt: st.UpdatedAt, ForkOf: lastFork(st.Variables.ForkChain)}
			if st.Status == fold.StatusSuspended && st.Variables.SuspendedOn != nil {
				row.SuspendedOn = st.Variables.SuspendedOn.On
			}
			rows = append(rows, row)
			if len(rows) == limit {
				if i < len(page.Executions)-1 || page.Next != "" {
					next = info.ExecutionID
				}
				break scan
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	prog.done()
	if c.json {
		if rows == nil {
			rows = []lsRow{}
		}
		return c.printJSON(struct {
			Executions []lsRow `json:"executions"`
			Next       string  `json:"next,omitempty"`
		}{rows, next})
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.stdout, "No executions match.")
		return nil
	}
	t := newTable(c.stdout, "EXECUTION", "FLOW", "STATUS", "EVENTS", "UPDATED", "NOTE")
	for _, r := range rows {
		note := ""
		if r.SuspendedOn != "" {
			note = "parked on " + r.SuspendedOn
		}
		if r.ForkOf != nil {
			if note != "" {
				note += "; "
			}
			note += fmt.Sprintf("fork of %s at #%d", r.ForkOf.ExecutionID, r.ForkOf.Sequence)
			if r.ForkOf.Simulate {
				note += " (simulation)"
			}
		}
		t.row(r.ExecutionID, r.WorkflowID, string(r.Status), strconv.FormatInt(r.Events, 10), stamp(r.UpdatedAt), note)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(c.stdout, "More: loom ls --after %s (with the same --store and filters)\n", next)
	}
	return nil
}
