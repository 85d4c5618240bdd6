package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/middleware"
)

// TaskKind is the task kind a model call is recorded under.
const TaskKind = "llm"

// DefaultRetry is a model call's retry policy unless WithRetry replaces it:
// 4 attempts, exponential backoff from 1 s capped at 30 s, at least the
// API's Retry-After, retrying rate limits, outages and malformed answers.
var DefaultRetry = middleware.RetryPolicy{
	MaxAttempts: 4,
	Backoff:     middleware.ExponentialBackoff(time.Second, 30*time.Second),
	Retryable:   Retryable,
}

// Retryable is the retry predicate of a model call: an *Error whose kind
// another attempt may fix (rate limited, unavailable, malformed), or an
// attempt that ran out of its own time while the call goes on. A
// cassette's refusal of a request it does not hold is final.
func Retryable(err error) bool {
	if e, ok := asError(err); ok {
		return e.Kind.Retryable()
	}
	var miss *UnrecordedRequestError
	if errors.As(err, &miss) {
		return false
	}
	return middleware.DefaultRetryable(err)
}

// CallOption configures one Complete.
type CallOption func(*call)

type call struct {
	chain       *Chain
	sink        func(Delta)
	retry       middleware.RetryPolicy
	prices      Prices
	fullRequest bool
	timeout     time.Duration
	meter       middleware.Meter
}

// Stream streams the call: sink gets each delta live, in order, on the
// effect's goroutine. Deltas are never recorded and a replayed call sends
// none; the recorded value is the final Response.
func Stream(sink func(Delta)) CallOption { return func(c *call) { c.sink = sink } }

// WithRetry replaces DefaultRetry (its Retryable defaults to Retryable).
func WithRetry(policy middleware.RetryPolicy) CallOption {
	return func(c *call) {
		if policy.Retryable == nil {
			policy.Retryable = Retryable
		}
		c.retry = policy
	}
}

// WithPrices prices the call's tokens with table instead of DefaultPrices.
func WithPrices(table Prices) CallOption { return func(c *call) { c.prices = table } }

// RecordRequest records the whole request as the step's input instead of
// its summary (model, digest, message and tool counts). It makes a log that
// shows every prompt, at the cost of the conversation's size per turn.
func RecordRequest() CallOption { return func(c *call) { c.fullRequest = true } }

// WithChain digests the request through chain, which holds the digest of
// the conversation so far: only the messages added since its last call are
// hashed, so a long conversation costs O(new messages) per turn rather than
// O(all of them). chain must have seen exactly a prefix of req.Messages
// (the agent loop keeps one per run and starts a new one after a
// compaction); the digest is the same as Digest(req).
func WithChain(chain *Chain) CallOption { return func(c *call) { c.chain = chain } }

// Timeout bounds each attempt of the call.
func Timeout(d time.Duration) CallOption { return func(c *call) { c.timeout = d } }

// WithMeter sets the clock the call's elapsed ms are read from when no
// metering ring is wired (default: the runtime's clock, Config.Clock).
func WithMeter(m middleware.Meter) CallOption { return func(c *call) { c.meter = m } }

// CallRecord is what a model call records as its step input: enough to say
// which request it was (the digest binds the step to it) without copying
// the conversation into every turn. Request is there with RecordRequest.
type CallRecord struct {
	Provider string   `json:"provider"`
	Model    string   `json:"model"`
	Digest   string   `json:"digest"`
	Messages int      `json:"messages"`
	Tools    int      `json:"tools,omitempty"`
	Request  *Request `json:"request,omitempty"`
}

// ToolID is the effect id a model call is authorized and recorded as:
// "llm:<provider>/<model>", so a grant or a policy can name one model.
func ToolID(provider, model string) string { return "llm:" + provider + "/" + model }

// Complete is a model call as a durable step of kind llm, under step id id.
//
// The first run sends req to p (streaming with Stream) and records the
// Response as the step's output; every replay, resume, fork or recovery that
// reaches the same id is served that Response without calling p. The call
// is authorized (K2) as ToolID(p.Name(), req.Model) and metered (K3): one
// RESOURCE_METERED per attempt with its ms, tokens (Usage.Total) and
// costUsd (from the price table; absent for an unpriced model), recorded by
// the app's metering ring or, without one, by Complete itself. A budget on
// the app's ring denies the next call with QUOTA_EXCEEDED
// (*middleware.QuotaExceededError).
//
// Failures: a provider *Error is retried under DefaultRetry (each retry a
// STEP_RETRYING, waiting at least the API's Retry-After); once retries are
// spent a typed kind (see Kind) fails the step on that kind's channel —
// recorded, catchable with FailureOf, and served on replay — and any other
// failure is an untyped *loom.StepError. Calling the same id with another
// request fails with *loom.StepReusedError. In a simulated fork (a
// what-if) the call is made for real: a model call is read-only.
func Complete(ctx *loom.Context, id string, p Provider, req Request, opts ...CallOption) (Response, error) {
	c := call{retry: DefaultRetry, prices: DefaultPrices}
	for _, o := range opts {
		o(&c)
	}
	if p == nil {
		return Response{}, fmt.Errorf("llm: complete %q: no provider", id)
	}
	digest, err := c.digest(req)
	if err != nil {
		return Response{}, err
	}
	rec := CallRecord{Provider: p.Name(), Model: req.Model, Digest: digest, Messages: len(req.Messages), Tools: len(req.Tools)}
	if c.fullRequest {
		rec.Request = &req
	}
	// A model call changes nothing in the world: it is ReadOnly, so a
	// simulated fork calls the model for real (what-if with another model
	// or prompt) while its side-effecting steps are simulated.
	task := &loom.Task{ID: id, Kind: TaskKind, ToolID: ToolID(p.Name(), req.Model), Errors: channels(), ReadOnly: true,
		Timeout: c.timeout, Retry: &c.retry,
		Invoke: func(goctx context.Context, _ json.RawMessage) (any, error) {
			return c.invoke(goctx, p, req)
		}}
	raw, err := ctx.Execute(task, rec)
	if err != nil {
		return Response{}, err
	}
	var resp Response
	if err := json.Unmarshal(raw, &resp); err != nil {
		return Response{}, fmt.Errorf("llm: complete %q: decoding the recorded response: %w", id, err)
	}
	return resp, nil
}

// digest is the request's digest, through the call's chain when it has one.
func (c *call) digest(req Request) (string, error) {
	if c.chain == nil {
		return Digest(req)
	}
	if err := c.chain.Extend(req.Messages); err != nil {
		return "", err
	}
	return c.chain.Digest(req)
}

// invoke is one attempt: the provider call, inside a metering ring of its
// own when the app wired none, reporting the call's tokens and cost.
func (c *call) invoke(goctx context.Context, p Provider, req Request) (Response, error) {
	ec := effect.FromContext(goctx)
	var resp Response
	attempt := func(ec *effect.Context, _ json.RawMessage) (json.RawMessage, error) {
		var err error
		resp, err = p.Complete(ec.Ctx(), req, c.sink)
		if err != nil {
			return nil, err
		}
		u := middleware.Usage{Tokens: middleware.Amount(float64(resp.Usage.Total()))}
		if cost, ok := c.prices.Cost(p.Name(), modelOf(resp, req), resp.Usage); ok {
			u.CostUSD = middleware.Amount(cost)
		}
		if err := middleware.Report(ec, u); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if ec == nil || middleware.Metered(ec) {
		if _, err := attempt(ec, nil); err != nil {
			return Response{}, err
		}
		return resp, nil
	}
	if _, err := middleware.Metering(c.meter, middleware.Budget{})(ec, nil, attempt); err != nil {
		return Response{}, err
	}
	return resp, nil
}

// modelOf is the model that answered, else the one asked for.
func modelOf(resp Response, req Request) string {
	if resp.Model != "" {
		return resp.Model
	}
	return req.Model
}

// channels declares the typed failure channels of a model call.
func channels() map[string]string {
	m := make(map[string]string, len(typedKinds))
	for _, k := range typedKinds {
		m[string(k)] = failureSchema
	}
	return m
}

func asError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
