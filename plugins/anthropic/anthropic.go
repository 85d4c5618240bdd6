package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/loom-kernel/loom/llm"
)

const (
	// ProviderName is the provider's name unless Options.Name says otherwise.
	ProviderName = "anthropic"
	// EnvAPIKey is the environment variable the key is read from when
	// Options.Credential names no source.
	EnvAPIKey = "ANTHROPIC_API_KEY"
)

// responseHeaderTimeout bounds the wait for a response's headers on the
// default HTTP client, as the SDK's own default client does: a server that
// accepts the connection and never answers cannot hold a call forever. It
// does not bound a stream's body.
const responseHeaderTimeout = 10 * time.Minute

// Options configures a Provider. The zero value is usable: the key from
// ANTHROPIC_API_KEY, the production endpoint, a default HTTP client, the
// name "anthropic".
type Options struct {
	// Credential is where the API key comes from, resolved on every call.
	// With no source named it reads EnvAPIKey.
	Credential llm.Credential
	// BaseURL is the API's root (scheme and host, and a path prefix for a
	// proxy); empty is https://api.anthropic.com. The SDK's client defaults
	// from the environment (ANTHROPIC_BASE_URL, ANTHROPIC_CUSTOM_HEADERS,
	// profiles) are not used: the endpoint and key are only what is given
	// here.
	BaseURL string
	// HTTPClient sends the requests; nil is a clone of http.DefaultTransport
	// with a ten-minute response-header timeout.
	HTTPClient *http.Client
	// Name is the provider's name (Provider.Name); empty is ProviderName.
	Name string
	// Now reads the clock a Retry-After HTTP date is measured against; nil
	// is time.Now.
	Now func() time.Time
}

// Provider is the Anthropic Messages API (POST /v1/messages) behind the
// llm.Provider SPI. It is safe for concurrent use. It sends exactly one
// HTTP request per Complete (the SDK's retries are off: a retry is the
// kernel's, recorded).
type Provider struct {
	name     string
	cred     llm.Credential
	now      func() time.Time
	messages sdk.MessageService
}

// New builds a Provider and its SDK client. It fails only on a BaseURL
// that is not an absolute http or https URL; a missing key is reported by
// Complete (llm.ErrNoCredential), when it is read.
func New(opts Options) (*Provider, error) {
	clientOpts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithMaxRetries(0),
		option.WithHTTPClient(httpClient(opts.HTTPClient)),
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil {
			return nil, errors.New("anthropic: the base URL does not parse")
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("anthropic: base URL %q is not an absolute http(s) URL", u.Redacted())
		}
		clientOpts = append(clientOpts, option.WithBaseURL(opts.BaseURL))
	}
	p := &Provider{name: opts.Name, cred: opts.Credential.WithDefaultEnv(EnvAPIKey), now: opts.Now}
	if p.name == "" {
		p.name = ProviderName
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.messages = sdk.NewClient(clientOpts...).Messages
	return p, nil
}

func httpClient(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Client{Transport: http.DefaultTransport}
	}
	t = t.Clone()
	t.ResponseHeaderTimeout = responseHeaderTimeout
	return &http.Client{Transport: t}
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return p.name }

// Complete implements llm.Provider: one Messages API call, streamed when
// sink is non-nil. The key is resolved first; without one Complete returns
// an *llm.Error of KindUnauthorized matching llm.ErrNoCredential and sends
// nothing. A request the API could not take as given (a tool schema that is
// not a JSON object, tool-call arguments that are not JSON, a MaxTokens
// that the SDK allows only when streaming) is KindInvalidRequest, also
// unsent. Request.Temperature is not sent: API version 2026-10-21, which
// this SDK speaks, refuses every sampling parameter.
func (p *Provider) Complete(ctx context.Context, req llm.Request, sink func(llm.Delta)) (llm.Response, error) {
	key, err := p.cred.Resolve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return llm.Response{}, p.cancelled(ctx)
		}
		return llm.Response{}, llm.NewError(p.name, llm.KindUnauthorized, 0, err.Error(), err)
	}
	params, err := p.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	var res *http.Response
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithResponseInto(&res)}
	if sink != nil {
		return p.stream(ctx, params, opts, &res, sink)
	}
	// The SDK refuses, before sending, a non-streamed call it expects to
	// outlast its ten-minute timeout; say so as a request to change.
	if _, err := sdk.CalculateNonStreamingTimeout(int(params.MaxTokens), params.Model, nil); err != nil {
		return llm.Response{}, llm.NewError(p.name, llm.KindInvalidRequest, 0,
			fmt.Sprintf("max_tokens %d: %v: call with a sink", params.MaxTokens, err), nil)
	}
	msg, err := p.messages.New(ctx, params, opts...)
	if err != nil {
		return llm.Response{}, p.failure(ctx, err, res)
	}
	if msg == nil || msg.Type != "message" {
		return llm.Response{}, llm.NewError(p.name, llm.KindMalformed, statusOf(res),
			"the answer is not a Messages API message", nil)
	}
	return p.response(msg)
}

// cancelled is the error of a call whose ctx ended: ctx.Err(), wrapped.
func (p *Provider) cancelled(ctx context.Context) error {
	return fmt.Errorf("llm: %s: call abandoned: %w", p.name, ctx.Err())
}

func statusOf(res *http.Response) int {
	if res == nil {
		return 0
	}
	return res.StatusCode
}
