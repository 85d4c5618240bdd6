// Package wire is the wire ABI of the kernel (spec §2 "wire handshake", T2):
// the JSON-RPC 2.0 projection of the syscall ABI over HTTP, so programs in
// any language start, resume, cancel, fork and read executions of a running
// app — and a Go Client for it.
//
// An app mounts it with one call and serves it on loopback:
//
//	h, err := wire.Handler(rt, wire.Options{Events: st.Events, Authenticate: wire.BearerToken(token, "ops")})
//	ln, err := wire.Listen("127.0.0.1:7070")
//	mux := http.NewServeMux()
//	mux.Handle(wire.Path, h)
//	err = wire.Serve(ctx, ln, mux)
//
// # Transport
//
// Every call is a JSON-RPC 2.0 request object POSTed as application/json
// (by-name params only; batches of up to Options.MaxBatch requests; a request
// without an id is a notification and gets no response). Responses are HTTP
// 200 with a JSON-RPC response, except: 401 (CodeUnauthenticated) before any
// byte of the body is read, 413 (CodeRequestTooLarge) for a body over
// Options.MaxRequestBytes, 405 for another HTTP method and 415 for another
// content type.
//
// Requests are decoded strictly, the same way every client in every
// language is expected to write them:
//
//   - member names are exact and given once: "Method" or "ExecutionId" is
//     not "method" or "executionId", and a name given twice is refused
//     (CodeInvalidRequest for the request object, CodeInvalidParams for
//     params); an unknown param is CodeInvalidParams, so a misspelled one
//     never goes unnoticed. Inside input, payload and credentials, which
//     the kernel treats as opaque JSON, names may repeat;
//   - all text is valid UTF-8: a string anywhere in params (an id, an event
//     type, a payload) that is not, or that holds a lone UTF-16 surrogate
//     escape such as "\udc00", is CodeInvalidParams with data.location,
//     never rewritten to U+FFFD — so no id stands for another;
//   - an id that is not a string, a number or null, or not valid UTF-8,
//     is CodeInvalidRequest answered with id null; a body that is not JSON
//     at all is CodeParseError.
//
// Every response is valid JSON in valid UTF-8: one that would not be (a
// stored payload that is not UTF-8) is replaced by CodeInternal, and an
// event stream ends with an internal-error event instead.
//
// # Methods (wire ABI 1.6.0)
//
//	method               params                                          result
//	loom.handshake       —                                               {wireAbiVersion, kernelAbiVersion, syscalls, eventSchemaVersion, methods, maxRequestBytes, maxEventsPage, flows}
//	execution.start      {flowId, input?, executionId?, wait?}           {executionId, state?}
//	execution.resume     {executionId, eventType, payload?, credentials?, wait?}  {executionId, state?}
//	execution.cancel     {executionId, reason?}                          {executionId}
//	execution.fork       {executionId, at, forkId?, simulate?, wait?}    {executionId (the fork's), state?}
//	execution.state      {executionId, at?}                              {executionId, state}
//	execution.events     {executionId, from?, limit?}                    {events: [envelope…], next?}
//	execution.subscribe  {executionId, from?}                            a text/event-stream (below)
//	execution.resolve    {executionId, stepId, attempt, done?, output?, wait?}  {executionId, state?}
//	execution.gate       {executionId}                                   {executionId, flowId, status, sequence, gate?}
//	execution.watch      {executionId}                                   a text/event-stream of states (below)
//	readmodel.query      {kind, where?, after?, limit?}                  {rows: [row…], next?, digest}
//	readmodel.watch      {kind, where?, after?, limit?}                  a text/event-stream of pages (below)
//	execution.send       {executionId, topic, payload?}                  {executionId}
//	execution.resumeAs   {executionId, flowId?, input?, eventType?, payload?, credentials?, wait?}  {executionId, state?}
//	runtime.recover      —                                               {recovered}
//	execution.list       {after?, limit?, flowId?, status?}              {executions: [summary…], next?}
//	execution.checkReplay {executionId}                                  {executionId, report}
//
// state is always fold.Encode's canonical JSON ({status, frames, variables,
// sequence, startedAt, updatedAt}), byte-identical on every conforming
// kernel. Envelopes have the on-disk field names of docs/events.md. With
// wait, a call returns once the execution parked or ended, within
// Options.Timeout; a missing state then means it is still running.
// execution.resume goes through the runtime's ingress gate (loom.Runtime.Resume)
// — kernel event types, the parked gate, resume schemas, the
// ResumeAuthenticator (which gets credentials) and the Authorizer — and every
// refusal appends nothing.
//
// The handshake's flows lists the registered flows ({id, codeFingerprint?,
// compatibleFingerprints?, resumeSchemas?: {gate: JSON Schema}}), so a
// client can show what each gate expects before it answers one.
// execution.gate says what an execution is parked on: gate {on, kind, since,
// wakeAt?, timeoutMs?, stepId?, attempt?, schema?, waits?} — kind "gate" (a
// flow's gate, answered by execution.resume with eventType = on and a payload
// schema accepts), "in-doubt" (a step with side effects whose outcome is
// unknown, stepId and attempt naming it), "diverged", "sleep", "select"
// (waits: [{waitId, kind, on?, topic?, wakeAt?, schema?}]) or "kernel";
// times are epoch milliseconds. execution.resolve is the operator's verdict
// on an in-doubt park (loom.Runtime.ResolveInDoubt): done with the step's
// output when the effect happened, else the step runs again as a new
// attempt; stepId and attempt must name the parked attempt, or nothing is
// recorded.
//
// readmodel.query (1.3.0) reads one page of the app's read models
// (Options.ReadModels, a store.ReadModelStore the app's projections
// write): rows of kind whose indexed fields equal where, in id order, after
// the cursor a previous page's next gave; each row is {kind, id,
// projection, fields?, doc, version}. digest identifies the page's content
// (projection.PageDigest). A server without Options.ReadModels refuses
// both read-model methods with -32071 (data.field "ReadModels"); an
// invalid query — a bad kind, field or cursor — is -32602 with data.field
// and data.reason, and nothing is read.
//
// execution.list (1.5.0) reads one page of the app's event store in id
// order (loom.Runtime.List): limit entries of the store's listing after the
// cursor after (default 50, at most 500), keeping the executions of flowId
// and in status when given; inbox streams are never listed. Each summary is
// {executionId, workflowId, length, status, sequence, updatedAt,
// suspendedOn?, tenant?, parent?, forkChain?} — the names of the
// inspector's listing and of loom ls --json — from the execution's latest
// durable folded state. A caller whose principal names a tenant sees only
// its tenant's executions; with the runtime's Authorizer each execution is a
// "list", and a denied one is left out: listing records nothing. Filters
// apply within the store page, so a page may hold fewer summaries than
// limit, none even, while next is set: next continues where the store page
// ended, and paging until next is absent visits every execution once. A
// negative limit, an unknown status, a malformed flowId or after is -32602
// with data.field and data.reason, and nothing is read.
//
// execution.checkReplay (1.6.0) judges the execution's whole stored log —
// compacted events read back from the app's archive — against the flows
// the app registered (loom.Runtime.CheckExecution): report is a
// loom.ReplayReport {executionId, flowId, status, length, verdict,
// sequence?, expected?, got?, path?, recordedPin?, registeredPin?,
// detail}, verdict one of compatible, diverged, parks-differently,
// code-pin-mismatch, unknown-flow or unreadable. Nothing runs and nothing
// is appended. It is a "query" to the Authorizer and is scoped to the
// caller's tenant; an unknown execution is -32030, a compacted one on an
// app without an archive -32071.
//
// # The event stream
//
// execution.subscribe answers 200 text/event-stream, following the store's
// log with catch-up: each envelope with sequence >= from, stored ones first,
// then each new one once durable, as
//
//	id: <sequence>
//	event: envelope
//	data: <envelope JSON>
//
// Comment lines (": ping") keep an idle stream open every Options.Heartbeat.
// A failure after the stream started is sent as "event: error" whose data is
// a JSON-RPC error object, and the stream ends (CodeUnavailable when the
// server is stopping). A Last-Event-ID request header resumes after that
// sequence. A refusal before the stream starts is an ordinary JSON-RPC error
// response.
//
// execution.watch (1.2.0) is a live query of the folded state on the same
// framing: the execution's current durable state first, then its state
// after each new durable event, as
//
//	id: <sequence>
//	event: state
//	data: <fold.Encode canonical state JSON>
//
// A Last-Event-ID header naming the sequence of the state the client holds
// skips the first state when nothing changed since; otherwise the current
// state comes first, so a reconnecting client is current at once.
//
// readmodel.watch (1.3.0) is the live form of readmodel.query: the page as
// it stands first, then the page again each time its content changes, as
//
//	id: <digest>
//	event: page
//	data: <{rows, next?} JSON>
//
// A Last-Event-ID header naming the digest of the page the client holds
// (readmodel.query's digest, or the last id received) skips the first page
// when it is unchanged, so a reconnecting client is never sent a page it
// has. The server re-reads the query when its projection runner applies
// rows (Options.ReadModelChanges) and every Options.ReadModelPoll for other
// writers.
//
// # Errors
//
// Every error is a JSON-RPC error object {code, message, data?} with a code
// that never changes meaning. The message says what was refused and what to
// do, built from the error's typed fields: it never echoes a payload,
// credentials or an authenticator's words. data holds structured detail
// (ErrorData lists every field): executionId; reason for the refusals;
// gate, location and violations ([{pointer, keyword, message}], never the
// payload's values) for a resume schema; owner and expiresAt (epoch ms: retry
// after it) when busy; recorded and registered for a code mismatch; field
// and need when the runtime is not configured; flows (the registered flow
// ids) for an unknown flow; field and limit; at and last.
//
//	code     meaning                                      from
//	-32700   parse error: the body is not JSON            —
//	-32600   invalid request                              not a JSON-RPC 2.0 request object; a bad id is answered with id null
//	-32601   method not found                             —
//	-32602   invalid params                               missing, mistyped, unknown or repeated params; text not UTF-8 (data.location); an invalid read-model or list query (data.field, data.reason)
//	-32603   internal error (cause logged, not sent)      anything unmapped
//	-32001   unauthenticated (HTTP 401)                   Options.Authenticate
//	-32002   denied                                       *loom.ExecutionDeniedError (the Authorizer)
//	-32003   request too large (HTTP 413)                 Options.MaxRequestBytes
//	-32010   resume refused, another reason               *loom.ResumeRefusedError (data.reason)
//	-32011   refused: kernel-event-type                   loom.RefusedKernelEventType
//	-32012   refused: not-suspended (retry once parked)   loom.RefusedNotSuspended
//	-32013   refused: gate-mismatch                       loom.RefusedGateMismatch
//	-32014   refused: not-recoverable                     loom.RefusedNotRecoverable
//	-32015   refused: null-answer-after-parked-failure    loom.RefusedNullAfterFailure
//	-32016   refused: timer-not-allowed                   loom.RefusedTimerNotDue
//	-32017   refused: terminal (the execution ended)      loom.RefusedTerminal
//	-32018   refused: unauthenticated resume              loom.RefusedUnauthenticated
//	-32019   refused: busy (retry after data.expiresAt)   *loom.ExecutionBusyError, loom.RefusedBusy (data.owner, data.expiresAt)
//	-32020   resume payload fails the gate's schema       *loom.ResumePayloadValidationError (data.gate, data.location, data.violations; data.reason "in-doubt" at an in-doubt park)
//	-32021   send refused: the execution has ended        *loom.SendRefusedError (data.executionId, data.reason) — 1.4.0
//	-32030   execution not found                          loom.ErrExecutionNotFound
//	-32031   execution exists                             loom.ErrExecutionExists (wins over a journal or store error in its chain)
//	-32032   unknown flow                                 loom.ErrUnknownFlow
//	-32033   sequence past the end of the log             fork at / state at (data.last)
//	-32034   the recorded code is not the registered one  *loom.FlowCodeMismatchError (data.recorded, data.registered) — 1.1.0
//	-32040   invalid input (id, event type, JSON value)   event.ErrInvalidEnvelope; *loom.InputTypeError (data.field "input", data.want)
//	-32041   payload too large                            *event.PayloadTooLargeError
//	-32050   deadline exceeded (may have taken effect)    context.DeadlineExceeded
//	-32051   cancelled (may have taken effect)            context.Canceled
//	-32060   unavailable: the runtime is closing          loom.ErrRuntimeClosed, store.ErrClosed
//	-32061   a durable append failed                      *loom.JournalError
//	-32062   conflict: another writer moved the log       store.ErrSequenceConflict
//	-32070   subscribe unsupported by the event store     no store.Subscriber
//	-32071   the app's runtime lacks a store or feature   *loom.NotConfiguredError (data.field, data.need) — 1.1.0
//
// The Client returns these as *Error, which matches the kernel's sentinels
// with errors.Is (loom.ErrExecutionNotFound, loom.ErrExecutionExists,
// loom.ErrUnknownFlow, event.ErrInvalidEnvelope, event.ErrPayloadTooLarge,
// context.DeadlineExceeded, context.Canceled).
//
// # Versions
//
// 1.1.0 added, without renaming or removing anything of 1.0.0: the methods
// execution.resolve and execution.gate, the handshake's flows, the codes
// -32034 and -32071, and the data fields violations, owner, expiresAt,
// recorded, registered, need, want and flows (data.location is kept: the
// first violation's pointer). An unknown flow's message now names the
// registered flows; a busy refusal's says when to retry.
//
// 1.2.0 added execution.watch; nothing was renamed or removed.
//
// 1.3.0 added readmodel.query and readmodel.watch, and data.reason on
// -32602 for an invalid read-model query; nothing was renamed or removed.
//
// 1.4.0 added execution.send, execution.resumeAs, runtime.recover and the
// code -32021; nothing was renamed or removed.
//
// 1.5.0 added execution.list, and data.field and data.reason on -32602 for
// an invalid list query; nothing was renamed or removed.
//
// 1.6.0 added execution.checkReplay; nothing was renamed or removed.
//
// # Security defaults
//
// Handler refuses to be built without Options.Authenticate unless
// Options.Insecure is set; the principal Authenticate returns is put on the
// request context with loom.WithPrincipal, so the runtime's Authorizer sees
// it (PrincipalFrom reads it back for a ResumeAuthenticator). Listen binds
// loopback unless AllowRemote is given. Bodies are capped (1 MiB by default).
package wire
