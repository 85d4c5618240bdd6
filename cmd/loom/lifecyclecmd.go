package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/postgres"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// The store-managing commands (compact, retention, delete) write: they open the
// store through its plugin, as the app does (a schema older than this
// loom's is migrated, as the app's next start would), and drive an inert
// runtime over it — no flows, no recovery, no timer poller — so nothing
// but the command's own writes happens.

// writableStore is a store opened for writing and a runtime over it.
type writableStore struct {
	rt    *loom.Runtime
	name  string
	close func() error
}

func (c *cli) withWritableStore(spec string, fn func(w *writableStore) error) (err error) {
	spec = storeSpec(spec)
	var (
		provider store.Provider
		closeFn  func() error
		name     = spec
	)
	switch {
	case spec == "":
		return usagef("--store is required: the app's SQLite file or its PostgreSQL DSN; or set LOOM_STORE")
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		dsn, schema, err := splitSchema(spec)
		if err != nil {
			return usagef("--store: %v", err)
		}
		st, err := postgres.Storage(c.ctx, postgres.Options{DSN: dsn, Schema: schema, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return fmt.Errorf("opening %s: %w", name, err)
		}
		provider, closeFn, name = st, st.Close, "the PostgreSQL schema "+strconv.Quote(schema)
	default:
		path := strings.TrimPrefix(spec, "sqlite:")
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return notFoundf("no store at %s: pass the SQLite file your app writes", path)
		}
		st, err := sqlite.Storage(sqlite.StorageOptions{Path: path})
		if err != nil {
			return fmt.Errorf("opening %s: %w", path, err)
		}
		provider, closeFn, name = st, st.Close, path
	}
	rt, err := loom.New(loom.Config{Storage: provider, Recovery: loom.Recovery{Disabled: true}, TimerPoll: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return errors.Join(err, closeFn())
	}
	defer func() { err = errors.Join(err, rt.Close(), closeFn()) }()
	return fn(&writableStore{rt: rt, name: name, close: closeFn})
}

func (c *cli) compactCommand() *cobra.Command {
	var storeSpec string
	var through int64
	cmd := &cobra.Command{
		Use:   "compact <id> --through <seq>",
		Short: "Move an execution's settled history into the archive (writes)",
		Long: `compact moves the events #1..#through of an execution out of its log into the
store's archive, after saving a snapshot at #through that stands for them:
the execution loads, resumes and replays as before, and the audit read
(loom logs shows the range as compacted) finds them in the archive. The
start event (#0) and the last event always stay. It is idempotent: run it
again after a crash and it finishes the move.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if !cmd.Flags().Changed("through") {
				return usagef("--through is required: the last sequence to move into the archive")
			}
			return c.withWritableStore(storeSpec, func(w *writableStore) error {
				var res loom.CompactResult
				err := c.wait(func() (err error) {
					res, err = w.rt.Compact(c.ctx, a[0], through)
					return err
				}, "compact: moving the history of %s through #%d into the archive of %s", a[0], through, w.name)
				var ce *loom.CompactError
				if errors.As(err, &ce) {
					return usagef("%v", err)
				}
				if err != nil {
					return c.explainWritable(a[0], err)
				}
				if c.json {
					return c.printJSON(res)
				}
				if res.Archived == 0 {
					fmt.Fprintf(c.stdout, "%s is already compacted through #%d: nothing moved\n", res.ExecutionID, res.Through)
					return nil
				}
				fmt.Fprintf(c.stdout, "%s: moved %d events (#%d–#%d) into the archive\n", res.ExecutionID, res.Archived, res.Through-int64(res.Archived)+1, res.Through)
				return nil
			})
		},
	}
	storeFlag(cmd, &storeSpec)
	cmd.Flags().Int64Var(&through, "through", 0, "the last `sequence` to move into the archive")
	return cmd
}

func (c *cli) retentionCommand() *cobra.Command {
	retention := &cobra.Command{Use: "retention", Short: "Apply a retention policy to a store (writes)"}
	var storeSpec, policyFile string
	var dryRun bool
	run := &cobra.Command{
		Use:   "run --store <store> --policy <file> [--dry-run]",
		Short: "Delete what a retention policy says has expired; --dry-run only counts it",
		Long: `retention run applies a retention policy to the store. The policy is a JSON
file (docs/lifecycle.md) whose members, all optional, are:

  terminalTtl           a duration ("720h"): delete ended executions whose end
                        is older (log and snapshots, and with a chain's last
                        execution its inbox streams; one a branch ref points
                        at is kept)
  deleteArchived        true: with terminalTtl, delete their archived
                        (compacted) history too (default: the archive stays)
  keepSnapshots         a count: prune each execution's snapshots to the
                        latest ones, its compaction checkpoint always kept
  trimConsumedMessages  true: move consumed inbox messages into the archive
  contentUnpinnedAfter  reserved; a positive value is refused

With --dry-run nothing changes and the counts say what would go. A policy
with an unknown member or a negative duration is refused before the store is
opened.`,
		Args: c.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if policyFile == "" {
				return usagef("--policy is required: a JSON file such as {\"terminalTtl\": \"720h\", \"keepSnapshots\": 2}")
			}
			data, err := os.ReadFile(policyFile)
			if err != nil {
				return usagef("--policy: %v", err)
			}
			policy, err := loom.ParseRetentionPolicy(data)
			if err != nil {
				return usagef("%s: %v", policyFile, err)
			}
			return c.withWritableStore(storeSpec, func(w *writableStore) error {
				verb := "deleting"
				if dryRun {
					verb = "counting"
				}
				var rep loom.RetentionReport
				err := c.wait(func() (err error) {
					rep, err = w.rt.ApplyRetention(c.ctx, policy, dryRun)
					return err
				}, "retention: %s what the policy expires in %s (every execution is read)", verb, w.name)
				if err != nil {
					return err
				}
				if c.json {
					return c.printJSON(rep)
				}
				verb = "deleted"
				if dryRun {
					verb = "would delete"
				}
				fmt.Fprintf(c.stdout, "%s %d ended executions (%d events), %d inbox streams and %d snapshots in %s; %d kept by a branch ref\n",
					verb, len(rep.Executions), rep.Events, rep.InboxStreams, rep.Snapshots, w.name, rep.KeptByRef)
				return nil
			})
		},
	}
	storeFlag(run, &storeSpec)
	run.Flags().StringVar(&policyFile, "policy", "", "the retention policy, a JSON `file`")
	run.Flags().BoolVar(&dryRun, "dry-run", false, "change nothing; say what would be deleted")
	retention.AddCommand(run)
	return retention
}

func (c *cli) deleteCommand() *cobra.Command {
	var storeSpec string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "delete <id> --store <store> [--dry-run]",
		Short: "Delete one ended execution and everything kept for it (writes)",
		Long: `delete removes one ended execution from the store: its log, its snapshots,
its archived (compacted) history, its kernel timers and, unless it continued
as a new execution, its chain's inbox streams — what a retention pass deletes
for an expired execution, without the TTL. It keeps what retention keeps and
what a live execution still needs, refusing with exit 5 and deleting nothing:
an execution that has not ended (cancel it first), one a branch ref points at,
a child whose live parent has not received its end, and a continued one whose
successor has not started. An unknown id exits 4. --dry-run deletes nothing
and says what would go; --json prints {dryRun, executionId, events,
snapshots, archived, timers, inboxStreams}. Run it while no other process
re-opens the execution (resume-as).`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := event.ValidateID("execution id", a[0]); err != nil {
				return usagef("%v", err)
			}
			return c.withWritableStore(storeSpec, func(w *writableStore) error {
				verb := "deleting"
				if dryRun {
					verb = "measuring"
				}
				var rep loom.DeleteReport
				err := c.wait(func() (err error) {
					rep, err = w.rt.DeleteExecution(c.ctx, a[0], dryRun)
					return err
				}, "delete: %s %s in %s", verb, a[0], w.name)
				var refused *loom.DeleteRefusedError
				if errors.As(err, &refused) {
					return &exitError{code: exitRefused, msg: strings.TrimPrefix(refused.Error(), "loom: "),
						data: map[string]any{"executionId": refused.ExecutionID, "reason": string(refused.Reason)}}
				}
				if err != nil {
					return c.explainWritable(a[0], err)
				}
				if c.json {
					return c.printJSON(rep)
				}
				done := "deleted"
				if dryRun {
					done = "would delete"
				}
				fmt.Fprintf(c.stdout, "%s %s from %s: %d events, %d snapshots, %d archived events, %d timers, %d inbox streams\n",
					done, rep.ExecutionID, w.name, rep.Events, rep.Snapshots, rep.Archived, len(rep.Timers), len(rep.InboxStreams))
				return nil
			})
		},
	}
	storeFlag(cmd, &storeSpec)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "change nothing; say what would be deleted")
	return cmd
}

// explainWritable maps a runtime error of a writing command to an exit.
func (c *cli) explainWritable(id string, err error) error {
	var nc *loom.NotConfiguredError
	switch {
	case errors.Is(err, loom.ErrExecutionNotFound):
		return notFoundf("no execution %q in the store", id)
	case errors.As(err, &nc):
		return unsupportedf("%v", err)
	}
	return err
}
