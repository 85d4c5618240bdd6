package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"google.golang.org/genai"

	"github.com/loom-kernel/loom/llm"
)

// DefaultName is the provider's name when Options.Name is empty.
const DefaultName = "gemini"

// DefaultEnv is the environment variable the API key is read from when
// Options.Credential names no source.
const DefaultEnv = "GEMINI_API_KEY"

// DefaultBaseURL is the Gemini Developer API's address. It is always passed
// to the SDK explicitly, so GOOGLE_GEMINI_BASE_URL in the environment never
// redirects a call.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/"

// apiVersion is the API version of every path (POST
// /v1beta/models/{model}:generateContent and :streamGenerateContent?alt=sse).
const apiVersion = "v1beta"

// Options configure a Provider. The zero value is usable: the key comes from
// GEMINI_API_KEY, calls go to DefaultBaseURL over a default HTTP client, and
// the provider is named DefaultName.
type Options struct {
	// Credential says where the API key comes from; with no source it reads
	// DefaultEnv. The key is resolved on every call.
	Credential llm.Credential
	// BaseURL is the API's address (DefaultBaseURL when empty): a test points
	// it at a fake server.
	BaseURL string
	// HTTPClient sends the requests (a client with no timeout when nil: the
	// call's ctx bounds it). It is copied, never modified.
	HTTPClient *http.Client
	// Name is the provider's name (DefaultName when empty).
	Name string
}

// Provider is the Gemini Developer API (generateContent) behind llm.Provider.
// It is safe for concurrent use.
type Provider struct {
	name       string
	credential llm.Credential
	baseURL    string
	httpClient *http.Client
	now        func() time.Time

	// mu guards key and client: the SDK takes the API key only when a client
	// is built, so the provider keeps the client of the last key it resolved
	// and builds another when the key changes (a rotation).
	mu     sync.Mutex
	key    string
	client *genai.Client
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider. It fails on a BaseURL that is not an absolute
// http(s) URL; it reads no credential and sends nothing (a missing key is
// reported by Complete, as llm.ErrNoCredential).
func New(opts Options) (*Provider, error) {
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gemini: BaseURL %q is not an absolute http(s) URL", base)
	}
	name := opts.Name
	if name == "" {
		name = DefaultName
	}
	hc := &http.Client{}
	if opts.HTTPClient != nil {
		copied := *opts.HTTPClient
		hc = &copied
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc.Transport = observingTransport{base: rt}
	return &Provider{
		name:       name,
		credential: opts.Credential.WithDefaultEnv(DefaultEnv),
		baseURL:    u.String(),
		httpClient: hc,
		now:        time.Now,
	}, nil
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return p.name }

// Complete implements llm.Provider: one generateContent call (nil sink) or
// one streamGenerateContent call over server-sent events (non-nil sink),
// never retried by the provider or the SDK.
//
// Failures are *llm.Error: a missing key is KindUnauthorized wrapping
// llm.ErrNoCredential, and sends nothing; a request the Gemini wire cannot carry is KindInvalidRequest and
// sends nothing; a cancelled ctx wraps ctx.Err(). No error or Response
// carries the API key.
func (p *Provider) Complete(ctx context.Context, req llm.Request, sink func(llm.Delta)) (llm.Response, error) {
	key, err := p.credential.Resolve(ctx)
	if err != nil {
		return llm.Response{}, llm.NewError(p.name, llm.KindUnauthorized, 0, err.Error(), err)
	}
	contents, config, err := buildRequest(req)
	if err != nil {
		return llm.Response{}, llm.NewError(p.name, llm.KindInvalidRequest, 0, err.Error(), err)
	}
	client, err := p.clientFor(ctx, key)
	if err != nil {
		return llm.Response{}, err
	}
	obs := &observation{}
	ctx = context.WithValue(ctx, observationKey{}, obs)
	if sink == nil {
		resp, err := client.Models.GenerateContent(ctx, req.Model, contents, config)
		if err != nil {
			return llm.Response{}, p.failure(ctx, err, obs)
		}
		var a answer
		a.add(resp, nil)
		return a.finish(p.name, req.Model)
	}
	var a answer
	for chunk, err := range client.Models.GenerateContentStream(ctx, req.Model, contents, config) {
		if err != nil {
			return llm.Response{}, p.failure(ctx, err, obs)
		}
		a.add(chunk, sink)
		if ctx.Err() != nil {
			return llm.Response{}, cancelled(p.name, ctx)
		}
	}
	return a.finish(p.name, req.Model)
}

// clientFor returns the SDK client that sends key. Building one reads no
// credential file and sends nothing: the backend, key and base URL are all
// explicit, so the SDK's environment lookups (GOOGLE_API_KEY,
// GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GEMINI_BASE_URL…) change nothing.
func (p *Provider) clientFor(ctx context.Context, key string) (*genai.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil && p.key == key {
		return p.client, nil
	}
	client, err := genai.NewClient(ctx, &genai.ClientConfig{
		APIKey:     key,
		Backend:    genai.BackendGeminiAPI,
		HTTPClient: p.httpClient,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:    p.baseURL,
			APIVersion: apiVersion,
			// One attempt, no SDK retries: a retry is the kernel's, recorded.
			RetryOptions: &genai.HTTPRetryOptions{Attempts: genai.Ptr[int32](1)},
		},
	})
	if err != nil {
		// The SDK's message prints its whole config, key included: never
		// surface it.
		return nil, llm.NewError(p.name, llm.KindInvalidRequest, 0, "the Gemini SDK refused its client configuration", errSDKConfig)
	}
	p.key, p.client = key, client
	return client, nil
}

// errSDKConfig stands in for the SDK's construction error, whose text holds
// the API key.
var errSDKConfig = errors.New("gemini: SDK client configuration refused")
