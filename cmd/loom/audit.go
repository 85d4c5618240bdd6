package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/auditchain"
)

// auditPage bounds one page of --all's listing.
const auditPage = 1000

func (c *cli) auditCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Check the tamper-evident chain of logs written through plugins/auditchain",
	}
	cmd.AddCommand(c.auditVerifyCommand())
	return cmd
}

func (c *cli) auditVerifyCommand() *cobra.Command {
	var (
		storeSpec, keyFile string
		all                bool
	)
	cmd := &cobra.Command{
		Use:   "verify <id>... | --all",
		Short: "Recompute each log's hash chain and name the first tampered sequence",
		Long: `verify recomputes the hash chain (plugins/auditchain) of each named
execution's log, or of every log with --all, and prints for each one either
ok, with its head (the last link: keep it elsewhere to detect a truncated log
later), or the first sequence that no longer fits and why: edited, deleted,
reordered, unchained (no chain member), wrong-key or malformed.

--key-file names the file holding the HMAC key the app wraps its store with,
its bytes exactly as written; without it the chain is checked as unkeyed
(SHA-256). It exits 3 when any log fails, 4 when a named execution has no log.

--json prints {executions: [{executionId, length, ok, sequence?, reason?,
detail?, head?}], ok}.`,
		Args: func(cmd *cobra.Command, a []string) error {
			c.command = cmd.Name()
			switch {
			case all && len(a) > 0:
				return usagef("pass execution ids or --all, not both")
			case !all && len(a) == 0:
				return usagef("want <id>... or --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, a []string) error {
			opts := auditchain.Options{}
			if keyFile != "" {
				key, err := os.ReadFile(keyFile)
				if err != nil {
					return usagef("--key-file: %v", err)
				}
				if len(key) == 0 {
					return usagef("--key-file %s is empty", keyFile)
				}
				opts.Key = key
			}
			return c.withStore(storeSpec, func(s *openedStore) error { return c.auditVerify(s, a, all, opts) })
		},
	}
	storeFlag(cmd, &storeSpec)
	cmd.Flags().StringVar(&keyFile, "key-file", "", "the `file` holding the chain's HMAC key (default: an unkeyed chain)")
	cmd.Flags().BoolVar(&all, "all", false, "verify every execution of the store")
	return cmd
}

// auditVerdict is one log's line of loom audit verify --json.
type auditVerdict struct {
	ExecutionID string `json:"executionId"`
	Length      int    `json:"length"`
	OK          bool   `json:"ok"`
	Sequence    *int64 `json:"sequence,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Detail      string `json:"detail,omitempty"`
	Head        string `json:"head,omitempty"`
}

// auditReport is what loom audit verify prints with --json.
type auditReport struct {
	Executions []auditVerdict `json:"executions"`
	OK         bool           `json:"ok"`
}

func (c *cli) auditVerify(s *openedStore, ids []string, all bool, opts auditchain.Options) error {
	if all {
		var err error
		if ids, err = c.allExecutions(s); err != nil {
			return err
		}
	}
	opts.Archive = s.archive
	rep := auditReport{Executions: []auditVerdict{}, OK: true}
	prog := c.newProgress()
	for i, id := range ids {
		prog.update("audit verify: %d of %d (%s)", i+1, len(ids), id)
		r, err := auditchain.VerifyExecution(c.ctx, s.Events, id, opts)
		if err != nil {
			prog.done()
			return err
		}
		if r.Length == 0 {
			prog.done()
			return c.explain(s, id, fmt.Errorf("%w: %q", loom.ErrExecutionNotFound, id))
		}
		v := auditVerdict{ExecutionID: id, Length: r.Length, OK: r.OK, Head: r.Head}
		if !r.OK {
			seq := r.Sequence
			v.Sequence, v.Reason, v.Detail = &seq, string(r.Reason), r.Detail
			rep.OK = false
		}
		rep.Executions = append(rep.Executions, v)
	}
	prog.done()
	if c.json {
		if err := c.printJSON(rep); err != nil {
			return err
		}
	} else {
		c.printAudit(rep)
	}
	if !rep.OK {
		bad := 0
		for _, v := range rep.Executions {
			if !v.OK {
				bad++
			}
		}
		return checkFailedf("%d of %d log(s) fail their chain: each was changed after it was written, or was written under another key", bad, len(rep.Executions))
	}
	return nil
}

// allExecutions lists every execution id of the store, page by page.
func (c *cli) allExecutions(s *openedStore) ([]string, error) {
	var ids []string
	after := ""
	for {
		page, err := s.Events.ListExecutions(c.ctx, after, auditPage)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Executions {
			ids = append(ids, e.ExecutionID)
		}
		if page.Next == "" {
			return ids, nil
		}
		after = page.Next
	}
}

func (c *cli) printAudit(rep auditReport) {
	for _, v := range rep.Executions {
		if v.OK {
			fmt.Fprintf(c.stdout, "✓ %s: %d events, chain intact (head %s)\n", v.ExecutionID, v.Length, v.Head)
		} else {
			fmt.Fprintf(c.stdout, "✗ %s: tampered at #%d (%s): %s\n", v.ExecutionID, *v.Sequence, v.Reason, v.Detail)
		}
	}
	if len(rep.Executions) == 0 {
		fmt.Fprintln(c.stdout, "(the store holds no executions)")
	}
}
