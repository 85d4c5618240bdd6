package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/wire"
)

func (c *cli) inspectCommand() *cobra.Command {
	var (
		storeSpec, addr string
		public          bool
	)
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Serve the web inspector over a store (read-only) until interrupted",
		Long: `inspect serves a web page over the store: the executions, each one's
timeline with a slider that shows the folded state at any sequence, frames
with their outputs and typed errors, decisions, gates with who answered them
and when, forks and branch refs — updated live as the log grows. It listens
on loopback (--addr, default a free port on 127.0.0.1) unless --public, and
never writes. Ctrl-C stops it (exit 0).`,
		Args: c.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.withStore(storeSpec, func(s *openedStore) error { return c.inspect(s, addr, public) })
		},
	}
	storeFlag(cmd, &storeSpec)
	cmd.Flags().StringVar(&addr, "addr", wire.DefaultAddr, "listen on this `host:port` (loopback unless --public)")
	cmd.Flags().BoolVar(&public, "public", false, "allow a non-loopback --addr: anyone who reaches it reads every execution")
	return cmd
}

func (c *cli) inspect(s *openedStore, addr string, public bool) error {
	in, err := inspect.New(s.Source, inspect.Options{AnyHost: public})
	if err != nil {
		return err
	}
	var opts []wire.ListenOption
	if public {
		opts = append(opts, wire.AllowRemote())
	}
	ln, err := wire.Listen(addr, opts...)
	if err != nil {
		return usagef("cannot listen on %s: %v", addr, err)
	}
	fmt.Fprintf(c.stdout, "Inspecting %s at http://%s/ (read-only; Ctrl-C to stop)\n", s.name, ln.Addr())
	stop := context.AfterFunc(c.ctx, in.Close)
	defer stop()
	return wire.Serve(c.ctx, ln, in)
}
