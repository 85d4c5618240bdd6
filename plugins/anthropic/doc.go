// Package anthropic is the llm.Provider of Anthropic's Messages API
// (Claude), built on the official SDK, github.com/anthropics/anthropic-sdk-go/v2,
// which speaks API version 2026-10-21.
//
// # Use
//
//	p, err := anthropic.New(anthropic.Options{}) // key from ANTHROPIC_API_KEY
//	if err != nil { … }
//	resp, err := p.Complete(ctx, llm.Request{Model: "claude-sonnet-4-6",
//		Messages: []llm.Message{llm.UserText("Why is checkout slow?")}}, nil)
//
// Options.Credential names where the key comes from (a secret reference, an
// environment variable, or the key itself); with none named it is the
// ANTHROPIC_API_KEY environment variable (EnvAPIKey). The key is resolved
// on every call and handed to the SDK for that request only, as its
// credential option (the SDK sends it as Authorization: Bearer, which the
// API takes as it takes x-api-key); a call without one fails with
// llm.ErrNoCredential before anything is sent. The SDK's client defaults
// from the environment (ANTHROPIC_BASE_URL, ANTHROPIC_AUTH_TOKEN, profiles,
// ANTHROPIC_CUSTOM_HEADERS) are not used. No error carries the key: the
// SDK's error value, which holds the request and so its headers, is never
// wrapped.
//
// # Calls
//
// Complete is one POST /v1/messages with the SDK's retries off: a retry is
// the kernel's, recorded in the log. With a nil sink it is the SDK's
// Messages.New; with a sink, Messages.NewStreaming, each text_delta and
// input_json_delta going to the sink as it arrives and the message
// assembled with the SDK's Accumulate, so a streamed call returns what the
// same answer returns unstreamed.
//
// In the request, the system prompt is the system parameter, an assistant's
// tool calls are tool_use blocks (ids kept), tool results are tool_result blocks
// (with is_error) in a user turn, tools are custom tools whose schemas are
// sent byte for byte, and ResponseFormat is the API's structured output,
// output_config.format of type json_schema (which has no name:
// ResponseFormat.Name is not sent). MaxTokens 0 is llm.DefaultMaxTokens.
// Request.Temperature is not sent: the API version this SDK speaks refuses
// temperature, top_p and top_k (a 400, even at their defaults), and the
// SDK has no field for them.
//
// In the answer, the text blocks are joined into Text and the tool_use
// blocks are the tool calls, in order; other blocks (thinking) are left
// out. end_turn, tool_use, max_tokens and stop_sequence are their stop
// reasons, model_context_window_exceeded is StopMaxTokens and pause_turn
// StopEnd. Usage maps member for member: the API's input_tokens already
// leaves out cache reads and writes.
//
// # Failures
//
// Every failure is an *llm.Error. A 429 (rate_limit_error) is
// KindRateLimited with the Retry-After hint; 5xx, 529 overloaded_error,
// an error event in a stream and a connection that fails or breaks off are
// KindUnavailable; a 200 that is not the wire format is KindMalformed; 401,
// 403 and 402 (billing) are KindUnauthorized; other 4xx are
// KindInvalidRequest, except the invalid_request_error saying the prompt is
// too long (or that it and max_tokens exceed the context limit), which is
// KindContextOverflow, the API having no error code for it. An answer with
// stop_reason "refusal" is KindRefused, its message carrying the policy
// category and explanation of stop_details. A cancelled ctx returns
// ctx.Err(), wrapped, and no *llm.Error.
//
// # Testing
//
// The package is tested, with the llm/llmtest conformance kit and on its
// own, against anthropictest.Server: a local fake of the Messages API on
// loopback that speaks its JSON and server-sent events and decodes every
// request back. No test touches the network.
package anthropic
