// Command loom is the operator's tool for Loom: lenses on the event log of a
// store (read-only), control of a running app through its wire ABI, and a
// web inspector.
//
//	loom ls              --store S [--status s] [--flow f] [--sort id|updated|status] [--limit n] [--after id]
//	loom logs <id>       --store S [--from seq] [--follow] [--internal]
//	loom state <id>      --store S [--at seq] [--internal]
//	loom diff <id>       --store S --from A [--to B]
//	loom replay-check <id> --store S
//	loom inspect         --store S [--addr 127.0.0.1:0]
//	loom handshake       --addr A --token T
//	loom start <flow>    --addr A --token T [--input JSON] [--id ID]
//	loom resume <id>     --addr A --token T --event TYPE [--payload JSON]
//	loom gate <id>       --addr A --token T   (or --store S, without the schema)
//	loom resolve <id>    --addr A --token T (--done OUTPUT | --rerun) [--step ID --attempt N]
//	loom cancel <id>     --addr A --token T [--reason TEXT]
//	loom fork <id>       --addr A --token T --at SEQ [--simulate] [--id ID]
//	loom kernel-manifest
//	loom compat          --abi V [--schema V] [--wire V] [--spi name=V]…
//	loom version         (or loom --version)
//	loom completion      bash|zsh|fish|powershell
//
// --store takes a SQLite file or a PostgreSQL DSN (postgres://…) and falls
// back to $LOOM_STORE; the store is only read: a SQLite file is opened with
// sqlite.OpenReadOnly (no migration, no checkpoint, no file created, a
// crashed writer's -wal read), a PostgreSQL one over read-only sessions.
// --addr and --token fall back to $LOOM_ADDR and $LOOM_TOKEN (prefer the
// variable: a token on a command line shows in ps). Every command prints
// tables for people and, with --json, JSON for machines — errors included,
// as {code, message, data?, exitStatus} on stdout. Long operations show
// progress on stderr when it is a terminal.
//
// Exit status:
//
//	0  success
//	1  failure (the store or the server failed, an unexpected error)
//	2  usage: a bad command line (a flag, an argument, malformed JSON)
//	3  check failed: replay-check found a mismatch, compat a version conflict
//	4  not found: no such store, execution, sequence or flow
//	5  refused or denied: the ingress gate, a resume schema, the authorizer,
//	   a wrong token, an id already in use, a busy execution, a code mismatch
//	6  unsupported: a store, schema or capability this build or app lacks
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, stderrTTY: isTerminal(stderr)}
	root := c.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && !c.json && wantsJSON(args) {
		c.json = true // the command line failed before --json was parsed
	}
	return c.exit(err)
}

// wantsJSON reports whether args ask for --json.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
