// Package llmtest is the conformance kit of the llm provider SPI: RunProvider
// checks a provider against a local fake of its API (a Server), and Script
// is the reply queue such a fake embeds.
//
// A provider plugin ships a fake server that speaks its API's real wire
// format on loopback (httptest), renders each scripted Reply in that format
// — JSON or server-sent events — and decodes every request it gets back into
// an llm.Request. The kit then checks both directions of the translation,
// streaming, cancellation and every failure kind, with no network.
package llmtest
