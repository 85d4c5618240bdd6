// Package mcp is Loom's client for Model Context Protocol servers, on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk): it connects to a
// server over streamable HTTP or stdio (a subprocess), lists its tools, and
// makes each tool call a durable step.
//
// Every call, whichever tool it names, runs through one registered effect,
// mcp.invoke (Effects), whose input — the Invocation: server, tool,
// arguments and the tool's schema pin — is what STEP_STARTED records. So a
// dynamic tool call replays from the log: a completed call (or one that
// failed typed) is served its recorded outcome and never reaches the
// server again, and recovery after a crash calls only what the log lacks.
// The step's tool id is "mcp.invoke:<server>/<tool>", so an
// effect.GrantTable or a policy can allow one tool of a server and not
// another; the effect checks that the Invocation names exactly that tool.
//
// A tool's input schema is pinned when it is listed (Tool.SchemaHash, the
// sha256 of its canonical JSON) and verified on every call: a tool the
// server no longer lists fails on the typed channel toolNotFound, a schema
// that changed on schemaDrift — both recorded, both catchable. An in-band
// isError result fails on toolError, which the agent loop feeds back to
// the model. A transport failure is untyped: a retry policy may retry it,
// and recovery re-runs it.
//
// Credentials come from an llm.Credential (a secret reference or an
// environment variable), resolved per HTTP request and sent as a Bearer
// header only: they never reach an Invocation, an output, an error or the
// log.
//
// Plain flows call Call (or ctx.Execute(Task(...), ...)); agent runs take
// AgentTools. Wiring:
//
//	c, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "docs", URL: url, Auth: llm.Credential{Env: "DOCS_TOKEN"}})
//	tools, err := c.Tools(ctx)
//	effects, err := effect.NewRegistry(mcp.Effects(c))
//	rt, err := loom.New(loom.Config{Effects: effects, ...})
package mcp
