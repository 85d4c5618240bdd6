package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loom-kernel/loom/llm"
)

// ServerConfig says how to reach one MCP server: over streamable HTTP (URL)
// or as a subprocess speaking MCP on its stdin and stdout (Command).
type ServerConfig struct {
	// Name is the server's name in tool ids ("mcp.invoke:<Name>/<tool>"),
	// in the Invocation a call records, and in grants. It is 1 to
	// MaxServerNameBytes of letters, digits, '_', '-' and '.'.
	Name string
	// URL is the endpoint of a streamable HTTP server. Set URL or Command,
	// not both.
	URL string
	// Command runs a stdio server: Command[0] is the program, the rest its
	// arguments. Close ends the process.
	Command []string
	// Env is added ("KEY=value") to the environment the subprocess inherits
	// from this process.
	Env []string
	// Auth, for an HTTP server, is the credential sent as
	// "Authorization: Bearer <key>" on every request: resolved per request
	// (a rotated secret takes effect at once), never logged, never recorded
	// and never part of an error. The zero Credential sends no header. A
	// stdio server takes its credentials from Env instead; Auth with
	// Command is refused.
	Auth llm.Credential
	// HTTPClient carries the HTTP requests (default: a client of the
	// Client's own, over a clone of http.DefaultTransport, whose idle
	// connections Close closes).
	HTTPClient *http.Client
}

// MaxServerNameBytes bounds ServerConfig.Name.
const MaxServerNameBytes = 64

// MaxTools bounds a server's tool listing: a longer one fails the listing.
const MaxTools = 1024

// ConfigError refuses a ServerConfig before anything is started or sent.
type ConfigError struct {
	Server string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("mcp: server %q: %s", e.Server, e.Reason)
}

// ErrClosed is returned by a call on a Client after Close.
var ErrClosed = errors.New("mcp: client closed")

// Client is a connection to one MCP server, safe for concurrent use. It
// keeps the server's tool listing to verify each call against: the listing
// is re-read after the server sends notifications/tools/list_changed, on
// every call when the server does not advertise list-changed notifications,
// and before a call is refused as toolNotFound or schemaDrift. A Client
// does not reconnect: once its session ends, calls fail untyped (a durable
// step re-runs them on recovery, with a new Client).
type Client struct {
	name    string
	session *sdk.ClientSession
	// notifies is whether the server promised tools/list_changed.
	notifies bool
	// own is the transport Connect made when cfg gave no HTTP client:
	// Close closes its idle connections.
	own *http.Transport

	mu      sync.Mutex
	gen     uint64          // list_changed notifications seen
	listGen uint64          // gen when the cached listing was requested
	listed  bool            // a listing is cached
	tools   map[string]Tool // the cached listing, by tool name
	changed chan struct{}   // closed (and replaced) on each notification
}

// Connect connects to the server cfg names and completes the MCP handshake.
// It refuses an invalid cfg with *ConfigError; a server that cannot be
// reached or started fails with the SDK's error. The context bounds the
// handshake only (a subprocess outlives it until Close).
func Connect(ctx context.Context, cfg ServerConfig) (*Client, error) {
	if err := validateConfig(cfg); err != nil {
		return nil, err
	}
	c := &Client{name: cfg.Name, changed: make(chan struct{})}
	client := sdk.NewClient(&sdk.Implementation{Name: "loom", Version: "v1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { c.toolsChanged() },
		Capabilities:           &sdk.ClientCapabilities{},
	})
	var transport sdk.Transport
	if cfg.URL != "" {
		hc := cfg.HTTPClient
		if hc == nil {
			if t, ok := http.DefaultTransport.(*http.Transport); ok {
				c.own = t.Clone()
				hc = &http.Client{Transport: c.own}
			}
		}
		transport = &sdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: authorized(hc, cfg.Auth)}
	} else {
		cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
		cmd.Env = append(os.Environ(), cfg.Env...)
		transport = &sdk.CommandTransport{Command: cmd}
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp: connecting to server %q: %w", cfg.Name, err)
	}
	c.session = session
	if init := session.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Tools != nil {
		c.notifies = init.Capabilities.Tools.ListChanged
	}
	return c, nil
}

// validateConfig refuses a config naming no server, both or neither
// transport, or a credential a stdio server would never get.
func validateConfig(cfg ServerConfig) error {
	refuse := func(reason string) error { return &ConfigError{Server: cfg.Name, Reason: reason} }
	if err := validName(cfg.Name); err != nil {
		return refuse(err.Error())
	}
	switch {
	case cfg.URL != "" && len(cfg.Command) > 0:
		return refuse("both URL and Command are set")
	case cfg.URL == "" && len(cfg.Command) == 0:
		return refuse("neither URL nor Command is set")
	case len(cfg.Command) > 0 && cfg.Command[0] == "":
		return refuse("Command names no program")
	case len(cfg.Command) > 0 && hasSource(cfg.Auth):
		return refuse("Auth is sent over HTTP only; pass a stdio server its credential in Env")
	}
	return nil
}

// validName checks a server name: 1 to MaxServerNameBytes of [A-Za-z0-9_.-],
// so "mcp.invoke:<server>/<tool>" parses back unambiguously.
func validName(name string) error {
	if name == "" || len(name) > MaxServerNameBytes {
		return fmt.Errorf("the name must be 1 to %d bytes", MaxServerNameBytes)
	}
	for _, r := range name {
		if !nameRune(r) && r != '.' {
			return fmt.Errorf("the name may hold letters, digits, '_', '-' and '.' only")
		}
	}
	return nil
}

// Name is the server's name in tool ids.
func (c *Client) Name() string { return c.name }

// Session is the underlying SDK session, for what this package does not
// wrap (resources, prompts). Calls made through it are not durable.
func (c *Client) Session() *sdk.ClientSession { return c.session }

// Close ends the session; for a stdio server it closes the subprocess's
// stdin and waits for it to exit (signalling it after a grace period).
func (c *Client) Close() error {
	err := c.session.Close()
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
	if err != nil {
		return fmt.Errorf("mcp: closing server %q: %w", c.name, err)
	}
	return nil
}

// toolsChanged marks the cached listing stale and wakes waiters.
func (c *Client) toolsChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	close(c.changed)
	c.changed = make(chan struct{})
}

// hasSource reports whether cred names a key at all.
func hasSource(cred llm.Credential) bool {
	return cred.Key != "" || cred.Secret != "" || cred.Env != ""
}

// authorized returns an HTTP client that adds the Bearer credential to
// every request, resolved when the request is sent.
func authorized(base *http.Client, cred llm.Credential) *http.Client {
	if base == nil {
		base = http.DefaultClient
	}
	if !hasSource(cred) {
		return base
	}
	c := *base
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = &bearer{next: next, cred: cred}
	return &c
}

// bearer is the RoundTripper that sends the credential.
type bearer struct {
	next http.RoundTripper
	cred llm.Credential
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	key, err := b.cred.Resolve(req.Context())
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // RoundTrip must close the body, even on error
		}
		return nil, fmt.Errorf("mcp: the server's credential: %w", err)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+key)
	return b.next.RoundTrip(r)
}
