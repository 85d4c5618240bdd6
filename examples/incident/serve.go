package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/wire"
)

// defaultServeAddr is where serve listens by default: the loom CLI's
// default --addr.
const defaultServeAddr = "127.0.0.1:7070"

// cmdServe serves the Loom wire ABI over the database until interrupted, so
// the loom CLI (loom start, resume, cancel, fork) and programs in any
// language drive incidents over JSON-RPC. Every request must carry the
// bearer token; the principal it stands for is recorded on EXECUTION_STARTED
// and, through a resume authenticator, as APPROVAL_GRANTED when it answers
// the approval gate.
func cmdServe(c *cli, args []string) (err error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", defaultServeAddr, "listen on `host:port` (loopback unless -public)")
	token := fs.String("token", os.Getenv("INCIDENT_TOKEN"), "the bearer `token` callers must send (default $INCIDENT_TOKEN)")
	as := fs.String("as", defaultApprover(), "the principal the token stands for, recorded as who started or approved")
	public := fs.Bool("public", false, "allow a non-loopback -addr (put TLS in front of it)")
	if _, err := c.flags(fs, args); err != nil {
		return err
	}
	if strings.TrimSpace(*token) == "" {
		return usagef("a token is required: -token T or INCIDENT_TOKEN=T (callers send Authorization: Bearer T)")
	}
	principal := map[string]string{"user": *as}
	s, err := c.openWith(true, func(cfg *loom.Config) {
		cfg.ResumeAuthenticator = wirePrincipal{}
		cfg.Recovery.Disabled = false // the server re-drives crashed incidents, at start and periodically
	})
	if err != nil {
		return err
	}
	defer s.closeInto(&err)
	if n, err := s.rt.Recover(c.ctx); err != nil {
		return err
	} else if n > 0 {
		fmt.Fprintf(c.stdout, "Recovered %d execution(s) a stopped process left running.\n", n)
	}
	h, err := wire.Handler(s.rt, wire.Options{Events: s.stores.Events, Authenticate: wire.BearerToken(*token, principal)})
	if err != nil {
		return err
	}
	var opts []wire.ListenOption
	if *public {
		opts = append(opts, wire.AllowRemote())
	}
	ln, err := wire.Listen(*addr, opts...)
	if errors.Is(err, wire.ErrNotLoopback) {
		return usagef("-addr %s is not a loopback address: bind 127.0.0.1, or pass -public to serve other machines", *addr)
	}
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(wire.Path, h)
	fmt.Fprintf(c.stdout, "Serving the Loom wire ABI %s for %s at http://%s%s as %s (bearer token required; Ctrl-C to stop).\n",
		wire.Version, c.db, ln.Addr(), wire.Path, *as)
	fmt.Fprintf(c.stdout, "Try: LOOM_TOKEN=… loom start %s --addr %s --input '{\"service\":\"checkout\",\"symptom\":\"p99 latency above 2s\"}'\n", flowID, ln.Addr())
	return wire.Serve(c.ctx, ln, mux)
}

// wirePrincipal is a resume authenticator that records the caller the wire
// authenticated as the one who answered the gate (APPROVAL_GRANTED).
type wirePrincipal struct{}

// Authenticate implements loom.ResumeAuthenticator: the principal the
// wire authenticated, or a refusal for a resume that did not come through
// it.
func (wirePrincipal) Authenticate(ctx context.Context, _ string, _ loom.ResumeEvent) (json.RawMessage, error) {
	p := wire.PrincipalFrom(ctx)
	if p == nil {
		return nil, errors.New("resumes of a served database go through the wire ABI")
	}
	return json.Marshal(p)
}
