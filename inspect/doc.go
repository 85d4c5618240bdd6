// Package inspect holds the read-only lenses on a store that operator
// tools share (D11: tooling is lenses on the log): Source.StateAt, the
// folded state of an execution at any sequence — the nearest snapshot plus
// the log tail, the fold the runtime itself does — and PollingFollow, which
// follows a log by re-reading it, for a store without a subscription of its
// own; and the web inspector built on
// them, which `loom inspect` serves and an app may mount next to its wire
// ABI.
//
// The inspector is one http.Handler (New) serving a page of plain HTML, CSS
// and JavaScript embedded in the binary (no CDN, no build step) and a JSON
// API under /api:
//
//	GET /api/executions?q=&status=&flow=&tenant=&after=&limit=&counts=  executions with their folded status, paged (≤ 500)
//	GET /api/executions/counts?q=&flow=&tenant=     the counts by status of what the prefix, flow and tenant select
//	GET /api/executions/live?…                      server-sent events: that page with its counts, again whenever it changes
//	GET /api/events?id=&from=&limit=                one page of a log (≤ 5000 events)
//	GET /api/log?id=                                the whole log as JSON lines (application/x-ndjson), an attachment "<id>.jsonl"
//	GET /api/state?id=&at=                          the canonical folded state after sequence at (latest without)
//	GET /api/refs?prefix=                           branch refs (BranchRegistry.ListRefs)
//	GET /api/live?id=&from=                         server-sent events: the log from a sequence on, as it grows
//	GET /api/watch?id=                              server-sent events: the folded state, then one per new event
//	GET /api/check?id=                              the app's verdict on the log under its code now (Options.Check; else 501)
//
// Over a store that keeps a store.ExecutionCatalog the list is newest start
// first, and the id prefix (q), status, flow and tenant select in the
// store, a page costing one index range whatever the store holds; over
// another it is the store's listing in id order, filtered a page at a
// time, without counts (order "id" in the answer).
//
// The page lists executions, shows one execution's timeline with a slider
// that displays the folded state at any sequence (frames with inputs,
// outputs and typed errors; decisions; gates with who answered them and
// when, from EXECUTION_SUSPENDED, APPROVAL_GRANTED and EXECUTION_RESUMED;
// forks from _forkChain and the __loom_fork__ markers; branch refs), and
// is live without a reload: the list follows /api/executions/live, the
// timeline /api/live, and the state pane, while its slider sits at the
// end, /api/watch. Without EventSource, or over a store that cannot follow
// a log (/api/watch and /api/live answer 501), a pane is fetched as the
// page's actions need it and says it is not live.
//
// The execution view opens at its current event (the last, scrolled into
// view and marked) or at the sequence its address names (#/x/<id>@<seq>,
// which moving the slider rewrites in place; a sequence the log does not
// hold is said in the page, which opens at the last event). It shows how
// long each step took and a chart of steps and parks, bars placed by their
// recorded timestamps; each retry's error and recorded delay; errors as
// text and every payload as indented JSON behind a disclosure with a copy
// button; the kernel's own decisions by meaning (a __loom_now reading as a
// time); for a running or parked execution what it waits on (the step in
// progress, its attempt, last failure and next attempt; the gate, its
// timeout and who may answer it); a link to every execution it names; and
// its log's download (/api/log). Every time it shows was recorded in the
// log, or computed from recorded values: never read from the page's clock.
//
// Divergence is marked twice over. From the log alone: a park on
// __loom_diverged__ (the runtime stopped a replay that parted from the
// log) is flagged in its row and in a banner with the recorded reason.
// Against the code: with Options.Check (loom inspect --app, or
// RuntimeChecker in the app) the page asks /api/check on opening an
// execution and on demand, and shows the app's verdict — compatible, or
// where its code would part from the log (the row at that sequence is
// marked, with what the log has there and what the code does), a code-pin
// mismatch with both pins, a flow the app no longer registers.
//
// It writes nothing: every method but GET and HEAD is refused, and a request
// whose Host is not a loopback name is refused unless Options.AnyHost is
// set, so a page on another origin cannot read it through DNS rebinding.
//
// # Acting on a running app
//
// With Options.Actions (an Actor: the wire ABI methods the actions call;
// a *wire.Client of the app that writes the store) the page acts: it
// answers a gate through a form made from the gate's JSON Schema, cancels,
// forks at the slider's sequence, resumes as a fixed flow or input, and
// resolves a step in doubt. The app records or refuses each, exactly as
// for any wire caller; the inspector itself still writes nothing.
//
//	GET  /api/session           {actions, check, csrf?}: whether the page may act and check, and the csrf of a cookie session
//	GET  /api/gate?id=          the app's execution.gate: the park, its JSON Schema, its timeout
//	POST /api/act/resume        {id, eventType, payload?}          execution.resume
//	POST /api/act/cancel        {id, reason?}                      execution.cancel
//	POST /api/act/fork          {id, at, simulate?}                execution.fork
//	POST /api/act/resume-as     {id, flowId?, input?}              execution.resumeAs
//	POST /api/act/resolve       {id, stepId, attempt, done?, output?}  execution.resolve
//
// Only these POSTs exist, and only with Actions (else 405, as every other
// POST). A body is one JSON object sent as application/json (else 415),
// at most MaxActionBytes (else 413), its members named exactly, each once,
// none unknown (else 400); a refused body sends nothing to the app. The
// answer is the wire result as JSON; the app's refusal is {error, code,
// data} with the app's message, wire code and data verbatim (data says,
// for a payload a schema refuses, which field and why), at the status
// StatusOfCode maps the code to: 404 not found, 409 the execution's state
// refuses it, 422 the answer or params are wrong, 403 denied, 502 the app
// failed or refused the inspector's own token, 504 past ActionTimeout (the
// action may still have taken effect). A refused action records nothing.
//
// # Login and CSRF
//
// New refuses Actions without Options.Token or Options.Authenticate
// (*OptionsError). With either set, every request needs a login, reads
// included: GET /?token=<Token> (compared in constant time) opens a
// session — a cookie of 32 random bytes, HttpOnly, SameSite=Strict,
// Path=/, Secure over TLS, named per Inspector — and redirects (303) to
// the same address without the token; "Authorization: Bearer <Token>"
// admits a script without a cookie. Without a login the API answers 401
// with a JSON error and the page a plain login page (no script) that says
// to open the link loom inspect printed; a wrong token sets nothing.
// Sessions live in memory for SessionLifetime (12 h) from their login, at
// most MaxSessions of them (a login past it ends the oldest). No answer
// ever holds a token.
//
// A cookie is sent by the browser on its own, so a POST of a cookie
// session must also carry the session's csrf (GET /api/session) in
// CSRFHeader (X-Loom-CSRF), an Origin, when sent, of the inspector's own
// host, and a Sec-Fetch-Site, when sent, of same-origin; else 403, and
// nothing reaches the app. A bearer needs none of it: no browser sends a
// bearer token unasked. A request Authenticate admits through its
// Authorization: Bearer header is a bearer's; one it admits on other
// grounds (a proxy's header, a client certificate) opens a session at
// GET / or GET /api/session and needs its csrf like a token login's.
package inspect
