// Package llm is Loom's provider-neutral model layer: the Provider SPI
// (messages, tools, tool calls and results, structured output, streaming
// deltas, usage and typed failures), cassettes that record and replay a
// provider, and Complete — a model call as a durable, metered step.
//
// A model call made with Complete is a step of kind llm: its Response is the
// recorded output, so replay, resume, fork and recovery never call the
// provider again for a turn the log holds. Its tokens and cost are recorded
// as RESOURCE_METERED, a budget on the metering ring denies the next call
// with QUOTA_EXCEEDED, and a provider failure is a typed failure on a
// declared channel (rateLimited, refused, invalidRequest, contextOverflow)
// a flow can catch.
//
// Providers live in plugins (plugins/anthropic, plugins/openai,
// plugins/gemini), each built on its API's official SDK and tested with the
// conformance kit llmtest.RunProvider against a local fake of the API.
package llm
