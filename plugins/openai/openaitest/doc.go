// Package openaitest is a local fake of the OpenAI Chat Completions API for
// tests: a Server on loopback (httptest) that speaks the API's wire format
// — chat.completion JSON, chat.completion.chunk server-sent events with a
// usage chunk and [DONE], {"error":{...}} bodies with the API's statuses —
// and decodes every request back into an llm.Request for the llmtest
// conformance kit. Normalize is the Target.Normalize for it: what the wire
// format cannot carry back.
//
// Failures render as the API sends them: 429 with Retry-After and code
// rate_limit_exceeded, 503 server_error, 400 invalid_request_error (with
// code context_length_exceeded for an overflow), 401 invalid_api_key, a
// refusal as a 200 answer whose message carries refusal text, and a
// malformed answer as a 200 HTML page.
package openaitest
