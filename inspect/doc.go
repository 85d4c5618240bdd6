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
//	GET /api/executions?after=&limit=&tenant=       executions with their folded status, paged (≤ 500)
//	GET /api/executions/live?after=&limit=&tenant=  server-sent events: that page, again whenever it changes
//	GET /api/events?id=&from=&limit=                one page of a log (≤ 5000 events)
//	GET /api/log?id=                                the whole log as JSON lines (application/x-ndjson), an attachment "<id>.jsonl"
//	GET /api/state?id=&at=                          the canonical folded state after sequence at (latest without)
//	GET /api/refs?prefix=                           branch refs (BranchRegistry.ListRefs)
//	GET /api/live?id=&from=                         server-sent events: the log from a sequence on, as it grows
//	GET /api/watch?id=                              server-sent events: the folded state, then one per new event
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
// It writes nothing: every method but GET and HEAD is refused, and a request
// whose Host is not a loopback name is refused unless Options.AnyHost is
// set, so a page on another origin cannot read it through DNS rebinding.
package inspect
