package a2a

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/loom-kernel/loom"
)

// Caller is who an authenticated request speaks for. Every task is scoped
// to the Caller that started it: ID and Tenant are recorded as the
// execution's principal, and another Caller is told the task does not
// exist.
type Caller struct {
	ID     string
	Tenant string
}

// AnonymousCaller is the Caller of every request to an Insecure server
// without Authenticate: all such requests share its tasks.
var AnonymousCaller = Caller{ID: "anonymous"}

// PublishedAgent is a flow published as an A2A agent. Name (letters,
// digits, '_' and '-') names it in its card and its path; FlowID is the
// registered flow a new task starts. The flow's input is the message's
// first data part, else its text as a JSON string; a gate the flow parks
// on is the task's input-required, answered by the next message to the
// task (same rule for its payload) through the gate's resume schema.
type PublishedAgent struct {
	Name        string
	Description string
	FlowID      string
	Version     string
	Skills      []protocol.AgentSkill
}

// ServerOptions configures NewServer.
type ServerOptions struct {
	// Agents are the flows published; the first is also served at the
	// root card path.
	Agents []PublishedAgent
	// Authenticate names the caller of a JSON-RPC request, or refuses it
	// (any error, or a Caller with an empty ID): the caller is then told
	// unauthenticated, and the error's text is never sent.
	Authenticate func(r *http.Request) (Caller, error)
	// Authorize allows caller to use agent (its Name), or refuses with any
	// error: the caller is told permission denied, nothing else.
	Authorize func(ctx context.Context, caller Caller, agent string) error
	// Insecure is the only way to build a server without both
	// Authenticate and Authorize: a missing Authenticate makes every
	// caller AnonymousCaller, a missing Authorize allows everything. Serve
	// refuses an Insecure server beyond loopback.
	Insecure bool
	// BaseURL is the URL clients reach the server at ("https://host"),
	// used for the interface URL in each card; empty derives it from each
	// card request's Host (http, or https behind TLS).
	BaseURL string
	// SettleTimeout bounds how long message/send waits for the execution
	// to park or end before it answers the task as working (then read it
	// with tasks/get); 0 is DefaultSettleTimeout.
	SettleTimeout time.Duration
}

// DefaultSettleTimeout is ServerOptions.SettleTimeout's default.
const DefaultSettleTimeout = 30 * time.Second

// MaxRequestBytes bounds a JSON-RPC request's body.
const MaxRequestBytes = 2 << 20

// AgentsPath is the path prefix of every published agent:
// "/agents/<name>" is its JSON-RPC endpoint, and
// "/agents/<name>/.well-known/agent-card.json" its card.
const AgentsPath = "/agents/"

// Server publishes flows of a Runtime as A2A agents over JSON-RPC. It is
// safe for concurrent use; it keeps no state of its own (every task is an
// execution, read from the runtime on each request).
type Server struct {
	rt      *loom.Runtime
	opts    ServerOptions
	schemas map[string]map[string]json.RawMessage // flow id → gate → schema
}

var agentName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NewServer builds a server publishing opts.Agents from rt. It refuses,
// with a *ConfigError, a server with no agents, an agent whose name is
// invalid or repeated, an agent whose flow rt does not register, and —
// matching ErrUnsecured — a server without both Authenticate and Authorize
// unless Insecure is set.
func NewServer(rt *loom.Runtime, opts ServerOptions) (*Server, error) {
	if rt == nil {
		return nil, &ConfigError{Field: "runtime", Problem: "is nil"}
	}
	if !opts.Insecure && (opts.Authenticate == nil || opts.Authorize == nil) {
		return nil, &ConfigError{Field: "ServerOptions.Authenticate/Authorize",
			Problem: "are both required (or set Insecure for a loopback-only server)", Err: ErrUnsecured}
	}
	if len(opts.Agents) == 0 {
		return nil, &ConfigError{Field: "ServerOptions.Agents", Problem: "is empty"}
	}
	flows := rt.Flows()
	s := &Server{rt: rt, opts: opts, schemas: map[string]map[string]json.RawMessage{}}
	seen := map[string]bool{}
	for _, a := range opts.Agents {
		if !agentName.MatchString(a.Name) || seen[a.Name] {
			return nil, &ConfigError{Field: "ServerOptions.Agents", Problem: "has an invalid or repeated name " + quote(a.Name)}
		}
		seen[a.Name] = true
		i := slices.IndexFunc(flows, func(f loom.FlowInfo) bool { return f.ID == a.FlowID })
		if i < 0 {
			return nil, &ConfigError{Field: "ServerOptions.Agents", Problem: "names flow " + quote(a.FlowID) + ", which the runtime does not register"}
		}
		s.schemas[a.FlowID] = flows[i].ResumeSchemas
	}
	if s.opts.SettleTimeout <= 0 {
		s.opts.SettleTimeout = DefaultSettleTimeout
	}
	s.opts.BaseURL = strings.TrimRight(s.opts.BaseURL, "/")
	return s, nil
}

// Handler serves every agent's card (GET, public, at
// "/agents/<name>/.well-known/agent-card.json", and the first agent's at
// "/.well-known/agent-card.json") and JSON-RPC endpoint (POST
// "/agents/<name>", authenticated and authorized on every call).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for i, a := range s.opts.Agents {
		card := s.cardHandler(a)
		mux.Handle("GET "+AgentsPath+a.Name+a2asrv.WellKnownAgentCardPath, card)
		if i == 0 {
			mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, card)
		}
		rpc := a2asrv.NewJSONRPCHandler(&taskHandler{s: s, agent: a})
		mux.Handle("POST "+AgentsPath+a.Name, s.authenticated(rpc))
	}
	return mux
}

// authResult is what the HTTP layer learnt of a request's caller; the
// JSON-RPC methods act on it, so a refusal is a JSON-RPC error.
type authResult struct {
	caller Caller
	ok     bool
}

type authKey struct{}

// authenticated bounds the body and authenticates the request.
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		res := authResult{caller: AnonymousCaller, ok: true}
		if s.opts.Authenticate != nil {
			c, err := s.opts.Authenticate(r)
			res = authResult{caller: c, ok: err == nil && c.ID != ""}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authKey{}, res)))
	})
}

// admit is the caller of a JSON-RPC call, once authenticated and
// authorized for agent.
func (s *Server) admit(ctx context.Context, agent string) (Caller, error) {
	res, _ := ctx.Value(authKey{}).(authResult)
	if !res.ok {
		return Caller{}, protocol.NewError(protocol.ErrUnauthenticated, "unauthenticated")
	}
	if s.opts.Authorize != nil {
		if err := s.opts.Authorize(ctx, res.caller, agent); err != nil {
			return Caller{}, protocol.NewError(protocol.ErrUnauthorized, "permission denied")
		}
	}
	return res.caller, nil
}

// cardHandler serves a's agent card.
func (s *Server) cardHandler(a PublishedAgent) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := s.opts.BaseURL
		if base == "" {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			base = scheme + "://" + r.Host
		}
		card := s.card(a, base+AgentsPath+a.Name)
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(card); err != nil {
			return // the client went away
		}
	})
}

// card is a's agent card with its JSON-RPC interface at url.
func (s *Server) card(a PublishedAgent, url string) *protocol.AgentCard {
	version := a.Version
	if version == "" {
		version = "1.0.0"
	}
	skills := a.Skills
	if skills == nil {
		skills = []protocol.AgentSkill{}
	}
	card := &protocol.AgentCard{
		Name: a.Name, Description: a.Description, Version: version,
		SupportedInterfaces: []*protocol.AgentInterface{protocol.NewAgentInterface(url, protocol.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain", "application/json"},
		DefaultOutputModes:  []string{"text/plain", "application/json"},
		Skills:              skills,
	}
	if s.opts.Authenticate != nil {
		card.SecuritySchemes = protocol.NamedSecuritySchemes{"bearer": protocol.HTTPAuthSecurityScheme{Scheme: "Bearer"}}
		card.SecurityRequirements = protocol.SecurityRequirementsOptions{{"bearer": protocol.SecuritySchemeScopes{}}}
	}
	return card
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
