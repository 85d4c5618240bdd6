package a2a

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/loom-kernel/loom/llm"
)

// ClientOptions configures Discover.
type ClientOptions struct {
	// Auth is the credential sent as "Authorization: Bearer <key>" on
	// every request to the peer (the card's and the JSON-RPC calls). It is
	// resolved on each request (a secret reference, an environment
	// variable, or a key), and never recorded: not in a step's input or
	// output, a fact, or an error. The zero Credential sends no header.
	Auth llm.Credential
	// HTTPClient carries the requests; nil is a client with
	// DefaultRequestTimeout. Its Transport is wrapped, never modified.
	HTTPClient *http.Client
}

// DefaultRequestTimeout bounds each request of a peer built without
// ClientOptions.HTTPClient.
const DefaultRequestTimeout = 5 * time.Minute

// MaxAgentNameBytes bounds a peer's name (the tool id qualifier and the
// agent tool's name).
const MaxAgentNameBytes = 64

// Peer is a remote A2A agent discovered from its agent card: the name the
// a2a.send effect and grants know it by ("a2a.send:<name>"), its card, and
// a client of its JSON-RPC endpoint. It is safe for concurrent use.
type Peer struct {
	name   string
	card   *protocol.AgentCard
	client *a2aclient.Client
}

// Discover reads the agent card at baseURL + "/.well-known/agent-card.json"
// and connects a JSON-RPC client to the interface it names. The peer's
// name is the card's name sanitized to letters, digits, '_' and '-' (other
// runes become '_', at most MaxAgentNameBytes). Every failure is a
// *RemoteError: a card that cannot be read (wrapping llm.ErrNoCredential
// when the credential does not resolve), a card without a name, or one
// without a JSON-RPC interface. Nothing is recorded: call it at set-up,
// outside flow code.
func Discover(ctx context.Context, baseURL string, opts ClientOptions) (*Peer, error) {
	hc := authorizedClient(opts)
	card, err := (&agentcard.Resolver{Client: hc}).Resolve(ctx, baseURL)
	if err != nil {
		return nil, &RemoteError{Agent: baseURL, Op: "agent card", Err: err}
	}
	name := SanitizeName(card.Name)
	if name == "" {
		return nil, &RemoteError{Agent: baseURL, Op: "agent card", Err: fmt.Errorf("the card has no name")}
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return nil, &RemoteError{Agent: name, Op: "connect", Err: err}
	}
	return &Peer{name: name, card: card, client: client}, nil
}

// Name is the peer's sanitized name: the qualifier of its tool id.
func (p *Peer) Name() string { return p.name }

// ToolID is the tool id of a send to this peer, "a2a.send:<name>": what a
// grant names to allow it.
func (p *Peer) ToolID() string { return EffectSend + ":" + p.name }

// Description is the card's description.
func (p *Peer) Description() string { return p.card.Description }

// Card returns the agent card the peer was discovered from (a shallow
// copy: treat its slices as read-only).
func (p *Peer) Card() protocol.AgentCard { return *p.card }

// Close releases the peer's client.
func (p *Peer) Close() error { return p.client.Destroy() }

// SanitizeName maps a card's name to letters, digits, '_' and '-': every
// other rune becomes '_', and the result is cut to MaxAgentNameBytes.
func SanitizeName(name string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(name) {
		if b.Len() >= MaxAgentNameBytes {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// authorizedClient returns the HTTP client of a peer: opts.HTTPClient (or
// a default one) whose transport adds the bearer credential, if any.
func authorizedClient(opts ClientOptions) *http.Client {
	var hc http.Client
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient
	} else {
		hc.Timeout = DefaultRequestTimeout
	}
	if a := opts.Auth; a.Key == "" && a.Secret == "" && a.Env == "" {
		return &hc
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &bearerTransport{cred: opts.Auth, base: base}
	return &hc
}

// bearerTransport adds "Authorization: Bearer <key>" to each request,
// resolving the credential per request. A credential that does not
// resolve fails the request with the credential's error, which names
// where it looked and never a value.
type bearerTransport struct {
	cred llm.Credential
	base http.RoundTripper
}

func (t *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	key, err := t.cred.Resolve(r.Context())
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper closes the body it does not send
		}
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+key)
	return t.base.RoundTrip(r)
}
