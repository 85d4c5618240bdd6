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
// It writes nothing: every method but GET and HEAD is refused, and a request
// whose Host is not a loopback name is refused unless Options.AnyHost is
// set, so a page on another origin cannot read it through DNS rebinding.
package inspect
