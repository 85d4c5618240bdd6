package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/wire"
)

// inspectFlags are the flags of loom inspect.
type inspectFlags struct {
	storeSpec, addr          string
	public                   bool
	app, appToken, loginFlag string
}

func (c *cli) inspectCommand() *cobra.Command {
	var f inspectFlags
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Serve the web inspector over a store (read-only, or acting on a running app with --app) until interrupted",
		Long: `inspect serves a web page over the store: the executions, each one's
timeline with a slider that shows the folded state at any sequence, frames
with their outputs and typed errors, decisions, gates with who answered them
and when, forks and branch refs — updated live as the log grows. It listens
on loopback (--addr, default a free port on 127.0.0.1) unless --public, and
never writes. Ctrl-C stops it (exit 0).

With --app (the wire ABI of the app that writes the store, with its bearer
token in --app-token or $LOOM_TOKEN) the page checks each log against the
code the app runs (where a replay would diverge, a code-pin mismatch) and
can act on the app: answer a gate through a form made from its JSON Schema,
cancel, fork at the slider's sequence, resume as a fixed flow, resolve a
step in doubt. The app records
or refuses each. The page then needs a login: the address printed carries a
token (random per run, or --inspect-token, or $LOOM_INSPECT_TOKEN) that
logs the browser in; scripts send it as Authorization: Bearer.`,
		Args: c.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.app == "" {
				for _, name := range []string{"app-token", "inspect-token"} {
					if cmd.Flags().Changed(name) {
						return usagef("--%s goes with --app: without --app the inspector is read-only and needs no login", name)
					}
				}
			}
			return c.withStore(f.storeSpec, func(s *openedStore) error { return c.inspect(s, f) })
		},
	}
	storeFlag(cmd, &f.storeSpec)
	cmd.Flags().StringVar(&f.addr, "addr", wire.DefaultAddr, "listen on this `host:port` (loopback unless --public)")
	cmd.Flags().BoolVar(&f.public, "public", false, "allow a non-loopback --addr: anyone who reaches it reads every execution")
	cmd.Flags().StringVar(&f.app, "app", "", "act on the app whose wire ABI is at this `host:port` or URL (the app that writes --store)")
	cmd.Flags().StringVar(&f.appToken, "app-token", "", "the app's bearer `token` (default $LOOM_TOKEN, which keeps it off the command line)")
	cmd.Flags().StringVar(&f.loginFlag, "inspect-token", "", "the inspector's login `token` (default $LOOM_INSPECT_TOKEN, else a random one per run)")
	return cmd
}

// appCheckTimeout bounds the handshake that checks --app and --app-token
// before the inspector serves.
const appCheckTimeout = 15 * time.Second

func (c *cli) inspect(s *openedStore, f inspectFlags) error {
	opts := inspect.Options{AnyHost: f.public}
	var app *wire.Client
	if f.app != "" {
		var (
			err error
			hs  wire.Handshake
		)
		if app, hs, err = c.inspectApp(f); err != nil {
			return err
		}
		opts.Actions = app
		if slices.Contains(hs.Methods, wire.MethodCheck) { // wire ABI 1.6.0 on
			opts.Check = app
		}
		if opts.Token = f.loginFlag; opts.Token == "" {
			opts.Token = os.Getenv("LOOM_INSPECT_TOKEN")
		}
		if opts.Token == "" {
			opts.Token = base64.RawURLEncoding.EncodeToString(randomLogin())
		}
	}
	in, err := inspect.New(s.Source, opts)
	if err != nil {
		return usagef("%v (--inspect-token or $LOOM_INSPECT_TOKEN)", err)
	}
	var lopts []wire.ListenOption
	if f.public {
		lopts = append(lopts, wire.AllowRemote())
	}
	ln, err := wire.Listen(f.addr, lopts...)
	if err != nil {
		return usagef("cannot listen on %s: %v", f.addr, err)
	}
	if app == nil {
		fmt.Fprintf(c.stdout, "Inspecting %s at http://%s/ (read-only; Ctrl-C to stop)\n", s.name, ln.Addr())
	} else {
		fmt.Fprintf(c.stdout, "Inspecting %s at http://%s/?token=%s (actions on %s; Ctrl-C to stop)\n",
			s.name, ln.Addr(), url.QueryEscape(opts.Token), app.Endpoint())
	}
	stop := context.AfterFunc(c.ctx, in.Close)
	defer stop()
	return wire.Serve(c.ctx, ln, in)
}

// inspectApp is the client of --app, with --app-token (or $LOOM_TOKEN),
// once a handshake (returned) showed it answers and admits the token.
func (c *cli) inspectApp(f inspectFlags) (*wire.Client, wire.Handshake, error) {
	token := f.appToken
	if token == "" {
		token = os.Getenv("LOOM_TOKEN")
	}
	cl, err := wire.NewClient(f.app, wire.WithToken(token))
	if err != nil {
		return nil, wire.Handshake{}, usagef("--app: %v", err)
	}
	ctx, cancel := context.WithTimeout(c.ctx, appCheckTimeout)
	defer cancel()
	hs, err := cl.Handshake(ctx)
	var we *wire.Error
	switch {
	case err == nil:
		return cl, hs, nil
	case errors.As(err, &we) && we.Code == wire.CodeUnauthenticated:
		return nil, wire.Handshake{}, usagef("the app at %s refused --app-token (or $LOOM_TOKEN): pass the bearer token its wire ABI is served with", cl.Endpoint())
	case errors.As(err, &we):
		return nil, wire.Handshake{}, err
	case errors.Is(err, context.DeadlineExceeded):
		return nil, wire.Handshake{}, fmt.Errorf("the app at %s did not answer within %s: is it the app's wire ABI?", cl.Endpoint(), appCheckTimeout)
	}
	return nil, wire.Handshake{}, fmt.Errorf("no Loom wire ABI answered at %s (%v): start the app's server, or pass its address as --app", cl.Endpoint(), err)
}

// randomLogin is the login token of a run without --inspect-token: 32
// bytes from crypto/rand, which never fails (Go 1.24).
func randomLogin() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}
