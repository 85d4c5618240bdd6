// Command incident is an incident-remediation agent on Loom, over an
// embedded SQLite file. The flow collects the service's signals, then runs
// an agent, the planner (agent.Run), whose model calls tools: the three
// diagnoses (in one turn, so they run as a Parallel block), propose_fix
// (the remediation plans) together with runbooks_lookup (the team's
// runbook for the cause, from an MCP server), and apply_fix, which changes
// production and so needs approval. The planner parks on apply_fix's approval gate — a gate
// named after the digest of that exact call — until someone approves,
// rejects or edits the call: from another process, hours later, or never
// (the gate times out after 24 h, which rejects the call). Approved, the
// fix runs, the model summarizes, and the flow checks the recovery;
// rejected, the model is told, and the flow escalates to on-call.
//
//	incident demo [-record]      the whole story, with a real process exit
//	incident start               start an incident; exits once it is parked
//	incident status <id>         where an incident is, and the call to approve
//	incident approve <id> -by ann approve the call (-variant V: another plan)
//	incident reject <id> -reason  reject it: the flow escalates instead
//	incident answer <id> <json>  send a raw agent.Answer (checked by the gate's schema)
//	incident resolve <id> -rerun resolve an in-doubt park (or -done OUTPUT)
//	incident verify <id>         re-fold the stored log and compare bytes
//	incident fork <id> [-at seq] copy the log up to a point into a new branch
//	incident log <id>            one line per stored event
//	incident serve -token T      serve the wire ABI for loom start/resume/…
//
// Every command takes -db FILE (default incident.db). Exit status: 0 on
// success, 1 on failure, 2 on a usage error.
//
// # The runbook server (MCP)
//
// Every process of the command (start, approve, reject, answer, serve,
// and the demo's own) starts a runbook server in-process: an MCP server
// built on the official SDK (github.com/modelcontextprotocol/go-sdk),
// served over streamable HTTP on 127.0.0.1 at a free port and closed when
// the process ends (runbooks.go). The process connects to it with Loom's
// MCP client (plugins/mcp), lists its one tool, lookup {service, cause},
// and offers it to the planner as runbooks_lookup (mcp.ModelName); the
// mcp.invoke effect (mcp.Effects) runs each call, recorded under the tool
// id mcp.invoke:runbooks/lookup with its Invocation (server, tool,
// arguments, schema pin) as the step's input. A runbook is a pure
// function of the arguments, so every process's server answers a call the
// same. A process that resumes an incident serves the recorded lookup from
// the log and never calls its own server: start and approve each print how
// many lookups their server answered (1, then 0), and the demo checks it.
//
// # The model
//
// By default the planner's model is the committed cassette,
// testdata/cassettes/planner.json (embedded in the binary), replayed with
// llm.OpenCassette in Replay mode: the demo makes no network call, asks
// nothing live, and the same incident always sends the same requests, so
// every run is deterministic and its log byte-verifiable. A request the
// cassette does not hold fails the model call (it is not retried).
//
// The committed cassette was recorded from the scripted model
// (scriptedmodel.go), a deterministic stand-in that answers each turn as a
// good model would — there is no network where it was made — by running
// the scenarios of record.go in Record mode:
//
//	go run ./examples/incident demo -record                      # from the scripted model
//	go run ./examples/incident demo -record -provider anthropic  # from a real model
//
// (from the repository root; -cassette FILE writes elsewhere). -record
// starts a fresh cassette, records every scenario, then plays the demo from
// the new file; rebuild to embed it, and regenerate the golden histories
// (go test ./examples/incident/ -run Golden -update-histories), which pin
// the model's answers. What differs between runs of an incident — the
// change id apply_fix returns, an approver's reason for rejecting — is
// replaced by a placeholder before a request is digested (ScrubRequest), so
// one recorded answer serves every run.
//
// -provider anthropic|openai|gemini (with -model, default
// claude-sonnet-4-5, gpt-4.1, gemini-2.5-flash) runs the planner live with
// the key in ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY; without
// the key the command fails naming the variable. -provider scripted plans
// any incident offline, with no cassette. Answer an incident with the
// model it was started with: the recorded turns are served from the log
// whatever the model, but the next one is asked of this process's model.
package main
