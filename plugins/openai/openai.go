package openai

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/loom-kernel/loom/llm"
)

// DefaultName is the provider's name when Options.Name is empty: part of
// the recorded tool id and of the price table's key.
const DefaultName = "openai"

// DefaultBaseURL is the API a provider talks to when Options.BaseURL is
// empty. The SDK's OPENAI_BASE_URL variable is not consulted: where a
// recorded call goes is configuration, not ambient environment.
const DefaultBaseURL = "https://api.openai.com/v1/"

// EnvAPIKey is the environment variable a Credential naming no source
// reads the API key from.
const EnvAPIKey = "OPENAI_API_KEY"

// Options configures a Provider. The zero value talks to api.openai.com
// with the key in OPENAI_API_KEY, over the SDK's default HTTP client.
type Options struct {
	// Credential is where the API key comes from; a Credential naming no
	// source reads EnvAPIKey. It is resolved on every call.
	Credential llm.Credential
	// BaseURL is the API root the chat/completions path is joined to
	// (DefaultBaseURL when empty); point it at any OpenAI-compatible server,
	// e.g. "http://localhost:8000/v1".
	BaseURL string
	// HTTPClient carries the requests (the SDK's default client when nil).
	HTTPClient *http.Client
	// Name is the provider's name (DefaultName when empty).
	Name string
}

// Provider is the OpenAI Chat Completions API (and any server that speaks
// it) behind llm.Provider. It is safe for concurrent use: the SDK client is
// built once, and each call resolves its key and sends exactly one request.
type Provider struct {
	name       string
	credential llm.Credential
	client     sdk.Client
}

var _ llm.Provider = (*Provider)(nil)

// errBaseURL does not echo the URL: it may carry credentials.
var errBaseURL = errors.New("openai: Options.BaseURL is not an absolute http(s) URL")

// New builds a provider and its SDK client. The SDK's own retries are off
// (a Complete is one HTTP request; retries are the kernel's, recorded). It
// fails only on an unusable BaseURL; a missing key is reported by Complete,
// which then sends nothing.
func New(opts Options) (*Provider, error) {
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errBaseURL
	}
	clientOpts := []option.RequestOption{option.WithBaseURL(base), option.WithMaxRetries(0)}
	if opts.HTTPClient != nil {
		clientOpts = append(clientOpts, option.WithHTTPClient(opts.HTTPClient))
	}
	return &Provider{
		name:       nameOr(opts.Name),
		credential: opts.Credential.WithDefaultEnv(EnvAPIKey),
		client:     sdk.NewClient(clientOpts...),
	}, nil
}

func nameOr(name string) string {
	if name == "" {
		return DefaultName
	}
	return name
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return p.name }

// Complete implements llm.Provider: one POST to chat/completions, streamed
// (with usage in the last chunk) when sink is non-nil. A request the API
// cannot carry (an unknown role, a schema that is not a JSON object) fails
// with KindInvalidRequest before anything is sent; so does a missing key,
// as an error matching llm.ErrNoCredential.
func (p *Provider) Complete(ctx context.Context, req llm.Request, sink func(llm.Delta)) (llm.Response, error) {
	key, err := p.credential.Resolve(ctx)
	if err != nil {
		return llm.Response{}, llm.NewError(p.name, llm.KindUnauthorized, 0, err.Error(), err)
	}
	params, err := p.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	var httpResp *http.Response
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithResponseInto(&httpResp)}
	if sink == nil {
		completion, err := p.client.Chat.Completions.New(ctx, params, opts...)
		if err != nil {
			return llm.Response{}, p.failure(ctx, err, httpResp, key)
		}
		return p.response(completion, key)
	}
	params.StreamOptions.IncludeUsage = sdk.Bool(true)
	stream := p.client.Chat.Completions.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var acc streamAccumulator
	for stream.Next() {
		acc.add(stream.Current(), sink)
	}
	if err := stream.Err(); err != nil {
		return llm.Response{}, p.failure(ctx, err, httpResp, key)
	}
	if ctx.Err() != nil {
		return llm.Response{}, p.failure(ctx, ctx.Err(), httpResp, key)
	}
	status := 0
	if httpResp != nil {
		status = httpResp.StatusCode
	}
	return p.streamed(&acc, status, key)
}
