// Package a2a connects Loom to the Agent2Agent (A2A) protocol, over the
// official Go SDK (github.com/a2aproject/a2a-go/v2, JSON-RPC binding).
//
// # Calling remote agents
//
// Discover reads a remote agent's card (/.well-known/agent-card.json) and
// returns a *Peer. Its credential (ClientOptions.Auth, an llm.Credential:
// a secret reference, an environment variable or a key) is resolved per
// request and sent as a Bearer header; it is never recorded.
//
// A send is a durable step whose tool id is "a2a.send:<peer>", so a
// GrantTable can allow one peer and not another:
//
//   - Effects(peers...) registers the one effect "a2a.send" for
//     loom.Config.Effects. Its input is SendInput {agent, message, data?,
//     taskId?, contextId?}; its output the remote task's Outcome {taskId,
//     contextId, state, text, artifacts, gate?, inputSchema?}. Each state
//     of the remote task it observes is emitted as a FactTask ("a2a.task")
//     fact. A completed send is served from the log on replay: the remote
//     agent is not called again.
//   - Ask(ctx, id, peer, text) sends from flow code and follows the remote
//     task: a remote input-required parks the flow on the local gate
//     AskGate(taskId, round), and the gate's answer is sent to the same
//     remote task in the step "<id>/reply:<n>", until the task ends.
//   - AgentTool(peer) is the peer as a tool of an agent loop. An
//     input-required outcome is the tool's result: the model answers by
//     calling the tool again with the task's ids.
//
// # Publishing flows as agents
//
// NewServer publishes registered flows as A2A agents: each PublishedAgent
// has a card at /agents/<name>/.well-known/agent-card.json (the first also
// at /.well-known/agent-card.json) and a JSON-RPC endpoint at
// /agents/<name>. A task is an execution:
//
//   - message/send without a taskId starts the agent's flow (input: the
//     message's first data part, else its text as a JSON string) under a
//     fresh id "a2a-<128 random bits>", with the caller recorded as the
//     execution's principal, and waits for it to park or end;
//   - the execution's status is the task's state: running is working, a
//     park on a flow's gate is input-required (the gate and its resume
//     schema in the status message's metadata, MetaGate and MetaSchema),
//     completed is completed (the output as the artifact "output"), failed
//     is failed, cancelled is canceled;
//   - message/send with the taskId of an input-required task resumes the
//     gate through the ingress gate: a payload the gate's schema refuses
//     is an invalid-params error, and nothing is appended;
//   - tasks/get and tasks/cancel read and cancel a task.
//
// Every task is scoped to its caller: each call compares the principal
// recorded on the execution (caller id, tenant, agent) with the
// authenticated caller, and a task of another caller — or of another
// agent — is "task not found", the same answer as a missing one, with
// nothing appended.
//
// A server is secure by default: NewServer refuses to build without both
// ServerOptions.Authenticate and ServerOptions.Authorize unless Insecure
// is set (ErrUnsecured), Listen binds 127.0.0.1 unless AllowRemote is
// given, and Serve refuses an Insecure server on a non-loopback listener.
// Refusals reach the caller as the protocol's errors (unauthenticated,
// permission denied, task not found, invalid params), never with the
// authenticator's or authorizer's own words.
//
// Not supported by the server: streaming (message/stream,
// tasks/resubscribe), tasks/list, push notifications and the extended
// card; the card advertises none of them. A runtime ExecutionAuthorizer,
// when configured, is asked before the scope check and keeps its own
// contract (it may record EXECUTION_DENIED on a denied query).
package a2a
