// Package mcpserver exposes a Loom runtime's chosen flows to any MCP host
// as tools, over the MCP streamable HTTP transport of the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// A FlowTool names a registered flow; a call starts it with the call's
// arguments as input, recorded under the caller's loom.Principal, and
// waits for it to settle: completed answers the output, failed an isError
// result with the failure's message, and a flow that parks for a human
// answers its executionId and gate (with the JSON Schema the answer must
// satisfy). The host then calls the built-in "resume" tool with
// {executionId, gate, payload}; it goes through the runtime's ingress gate,
// so a refusal (a wrong gate, a payload the schema refuses) is an isError
// result naming it, with nothing appended. Only the caller that started an
// execution can resume it; any other caller is told it does not exist. An
// effect is exposed through a flow that runs it: see EffectFlow.
//
// Secure by default: New refuses a server without Options.Authenticate and
// Options.Authorize unless Options.Insecure says otherwise; Listen binds
// loopback unless Options.AllowNonLoopback; every HTTP request is
// authenticated before anything reads it (401 and WWW-Authenticate
// otherwise); tools/list shows a caller only the tools its audiences allow;
// every call is authorized per tool before anything starts; and OAuth
// discovery probes under /.well-known/ are answered 404 before
// authentication, since the server offers no OAuth. The SDK negotiates the
// protocol version on initialize.
//
// The server is stateless: every request is served by a view built for its
// caller and no MCP session outlives a request. Every answer is an Outcome,
// as structured content and as the same JSON in text.
package mcpserver
