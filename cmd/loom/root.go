package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// cli is one invocation: where it writes, and what the root flags said.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	stderrTTY      bool

	json     bool   // --json
	progress string // --progress: auto, always, never

	command string // the running subcommand, for messages
	ran     bool   // a subcommand's RunE started: later errors are not usage errors
}

func (c *cli) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "loom",
		Short: "Lenses on Loom's event logs, control of a running app, and a web inspector",
		Long: `loom reads a Loom store (--store: a SQLite file, or a PostgreSQL URL such as
postgres://user@host/db?loom_schema=loom) without writing to it, and talks to
a running app through its wire ABI (--addr, --token); ls does either. Only
compact, retention and delete write to a store.

With --json every command prints JSON on stdout, errors included: an object
{code, message, data?, exitStatus} whose code is the app's JSON-RPC error
code when the app refused, else the exit status.

Exit status: 0 success, 1 failure, 2 usage, 3 check failed (replay-check,
compat), 4 not found, 5 refused or denied, 6 unsupported.`,
		Version:       loomVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			c.command = cmd.Name()
			switch c.progress {
			case "auto", "always", "never":
			default:
				return usagef("--progress is auto, always or never, not %q", c.progress)
			}
			c.ran = true
			return nil
		},
	}
	root.SetVersionTemplate(versionText() + "\n")
	root.PersistentFlags().BoolVar(&c.json, "json", false, "print JSON for machines instead of text for people (errors too, on stdout)")
	root.PersistentFlags().StringVar(&c.progress, "progress", "auto", "progress on stderr: auto (only on a terminal), always or never")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		c.command = cmd.Name()
		return usagef("%v", err)
	})
	root.AddGroup(&cobra.Group{ID: "read", Title: "Read a store (read-only):"},
		&cobra.Group{ID: "control", Title: "Control a running app (wire ABI):"},
		&cobra.Group{ID: "manage", Title: "Manage a store (writes):"},
		&cobra.Group{ID: "kernel", Title: "Kernel contract:"})
	for _, cmd := range []*cobra.Command{c.lsCommand(), c.logsCommand(), c.stateCommand(), c.diffCommand(),
		c.replayCheckCommand(), c.inspectCommand(), c.auditCommand()} {
		cmd.GroupID = "read"
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{c.handshakeCommand(), c.startCommand(), c.resumeCommand(), c.gateCommand(),
		c.resolveCommand(), c.sendCommand(), c.cancelCommand(), c.forkCommand(), c.resumeAsCommand(), c.recoverCommand()} {
		cmd.GroupID = "control"
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{c.compactCommand(), c.retentionCommand(), c.deleteCommand()} {
		cmd.GroupID = "manage"
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{c.manifestCommand(), c.compatCommand(), c.deployCommand(), c.evalCommand(), c.versionCommand()} {
		cmd.GroupID = "kernel"
		root.AddCommand(cmd)
	}
	return root
}

// args returns a cobra.PositionalArgs that wants exactly the named
// arguments, as a usage error.
func (c *cli) args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		c.command = cmd.Name()
		if len(got) != len(names) {
			if len(names) == 0 {
				return usagef("unexpected argument %q", got[0])
			}
			want := make([]string, len(names))
			for i, n := range names {
				want[i] = "<" + n + ">"
			}
			return usagef("want %s, got %d argument(s)", strings.Join(want, " "), len(got))
		}
		return nil
	}
}

// storeFlag adds --store. Its default, $LOOM_STORE, is read when the
// command runs (storeSpec), so help shows the variable, never its value.
func storeFlag(cmd *cobra.Command, into *string) {
	cmd.Flags().StringVar(into, "store", "", "the store: a SQLite `file`, or a PostgreSQL DSN (default $LOOM_STORE)")
}

// storeSpec is --store, or $LOOM_STORE without it.
func storeSpec(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv("LOOM_STORE")
}

// printJSON writes v as indented JSON with a final newline.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
