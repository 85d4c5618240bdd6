// Package openai is the llm.Provider for the OpenAI Chat Completions API
// (POST {base}/chat/completions, "Authorization: Bearer <key>"), and so
// for servers that speak it (vLLM, Ollama, LiteLLM and the like). It is
// built on the official SDK (github.com/openai/openai-go/v3) with the SDK's
// retries off: one Complete is one HTTP request, and retries are the
// kernel's, recorded.
//
// Wiring:
//
//	p, err := openai.New(openai.Options{})                      // api.openai.com, key in OPENAI_API_KEY
//	p, err := openai.New(openai.Options{Credential: llm.Credential{Secret: "openai-key", Resolver: secrets}})
//	p, err := openai.New(openai.Options{BaseURL: "http://localhost:8000/v1", Name: "vllm"})
//
// The key comes from Options.Credential, resolved on every call; a
// Credential naming no source reads OPENAI_API_KEY. A call without a key
// fails with an error matching llm.ErrNoCredential and sends nothing. The
// key reaches the request's Authorization header only: error messages have
// it redacted, and the SDK error kept as the cause has its request (whose
// headers hold the key) dropped.
//
// The mapping. Request.System is a leading system message; each ToolResult
// is its own "tool" message with tool_call_id (the API has no error flag:
// a failed result's content starts with ToolErrorPrefix, and the result's
// Name is not sent); tools are function tools with their JSON Schema as
// parameters; ResponseFormat is response_format json_schema with strict
// true; MaxTokens is max_completion_tokens (omitted when 0: the API needs
// none). Streaming asks for stream_options.include_usage, so the last
// chunk carries usage. Usage: prompt_tokens includes the cached tokens and
// the cache writes of prompt_tokens_details, so InputTokens is
// prompt_tokens less both, CacheReadTokens is cached_tokens and
// CacheWriteTokens is cache_write_tokens (0 when the server does not
// report it). finish_reason stop, tool_calls, length map to StopEnd,
// StopToolUse, StopMaxTokens; a refusal (message.refusal) or
// finish_reason content_filter is an *llm.Error of KindRefused.
//
// Failures: 429 is KindRateLimited with retry-after-ms or Retry-After as
// RetryAfter; 401 and 403 KindUnauthorized; 400, 404, 422 KindInvalidRequest,
// but error code context_length_exceeded (or a "maximum context length"
// message, as vLLM says it) is KindContextOverflow and code content_filter
// (Azure's) KindRefused; 408, 409, 5xx and a broken connection KindUnavailable; an
// answer that is not the wire format (a 200 HTML page, a stream that ends
// without a finish_reason) KindMalformed. A cancelled context returns an
// error matching it.
//
// The package is tested against openaitest, a local fake of the API on
// loopback that speaks its JSON and server-sent-event shapes, with the
// llmtest conformance kit; no test needs the network.
package openai
