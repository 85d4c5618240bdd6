// Package gemini is the Google Gemini Developer API behind Loom's model
// SPI (llm.Provider), built on the official SDK, google.golang.org/genai,
// with its Gemini API backend.
//
// Wiring:
//
//	p, err := gemini.New(gemini.Options{}) // the key from GEMINI_API_KEY
//	resp, err := p.Complete(ctx, llm.Request{Model: "gemini-2.5-flash", …}, nil)
//
// The key is resolved from Options.Credential on every call (a secret
// reference, an environment variable, or the key itself; GEMINI_API_KEY
// when the credential names no source — GOOGLE_API_KEY is not read, name it
// in Credential.Env to use it). It is sent in the x-goog-api-key header and
// never appears in an error or a Response. The SDK takes the key only when
// a client is built, so the provider keeps the client of the last key it
// resolved and builds a new one when the key changes; building one reads no
// credential file, ignores the SDK's environment variables (everything it
// would read from them is set explicitly) and sends nothing.
//
// Each Complete is exactly one HTTP request: POST
// /v1beta/models/{model}:generateContent, or, with a sink,
// :streamGenerateContent?alt=sse. The SDK's retries and its automatic
// continuation are off; retries are the kernel's, recorded.
//
// The mapping, and what the Gemini wire cannot carry:
//
//   - Request.System is systemInstruction; assistant turns are role
//     "model" (text, then one functionCall part per call, with its id);
//     tool results are functionResponse parts of a user turn. A result
//     whose content is a JSON object is sent as that object, unless one of
//     its numbers would not survive the SDK's float64 round trip; any other
//     content is {"output": content}, and a failed call's is
//     {"error": content}. A result with no name takes its call's.
//   - Replayed function calls carry the thought signature Google documents
//     for history whose real signature is unknown
//     ("skip_thought_signature_validator"): the SPI has no field for the
//     signature an answer carried, and Gemini 3 models refuse a replayed
//     call without one.
//   - Tools are functionDeclarations with parametersJsonSchema;
//     ResponseFormat is responseMimeType application/json with
//     responseJsonSchema (its Name has no field and is not sent). The SDK
//     re-encodes schemas and arguments through maps: member order and a
//     number's spelling are not kept, and an integer beyond 2^53 in a tool
//     call's arguments loses precision.
//   - MaxTokens is maxOutputTokens (omitted when 0: the API needs none);
//     Temperature travels as a float32.
//   - A streamed answer's text reaches the sink fragment by fragment; a
//     function call arrives whole (the Gemini API never splits its args),
//     so each tool call is one Delta carrying its index, id, name and
//     arguments. A call the API sent without an id is named by its
//     position in the answer, "call_<index>".
//   - finishReason STOP is llm.StopEnd (llm.StopToolUse with function
//     calls; a stop sequence is also STOP, so llm.StopSequence never
//     comes back), MAX_TOKENS llm.StopMaxTokens; the safety family
//     (SAFETY, RECITATION, PROHIBITED_CONTENT, BLOCKLIST, SPII, LANGUAGE,
//     IMAGE_*) and a promptFeedback blockReason are KindRefused;
//     MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL and TOO_MANY_TOOL_CALLS
//     are KindMalformed (retried: another attempt may do better).
//   - Usage: promptTokenCount includes cachedContentTokenCount, so
//     InputTokens is their difference (plus toolUsePromptTokenCount),
//     CacheReadTokens the cached count, OutputTokens candidatesTokenCount
//     plus thoughtsTokenCount; Gemini reports no cache writes.
//   - Errors ({"error":{"code","message","status"}}): 429 or
//     RESOURCE_EXHAUSTED is KindRateLimited, its hint the Retry-After
//     header or else a google.rpc.RetryInfo retryDelay; 401, 403 and a 400
//     naming the key invalid (API_KEY_INVALID, Gemini's answer to a bad
//     key) are KindUnauthorized; a 400 saying the input token count
//     exceeds the maximum (or the payload size exceeds the limit) is
//     KindContextOverflow; other 4xx are KindInvalidRequest; 408, 5xx, a
//     refused connection and a stream cut mid-answer are KindUnavailable;
//     a 200 whose body is not the wire format is KindMalformed. A
//     cancelled ctx wraps ctx.Err().
//
// The provider is tested against geminitest, a local fake of the API on
// loopback that speaks its JSON and server-sent-event shapes, with the
// llm/llmtest conformance kit; no test reaches the network.
package gemini
