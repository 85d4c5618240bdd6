// Package agent is Loom's canonical agent loop over any llm.Provider: a
// model that calls tools until it can answer, where every model turn and
// every tool call is a durable fact.
//
// Run asks the model (an llm.Complete step per turn), runs the tools it
// calls (a step per call, with a deterministic id from the turn and the
// call's index; a turn's calls run as a Parallel block), feeds the results
// back and repeats until the model answers without calling a tool or a limit
// (MaxTurns, Budget, Deadline) stops it. A crash at any point resumes
// without asking the model again for a recorded turn and without re-running
// a completed tool; a fork at any turn replays the prefix from the log and
// lets a different model, prompt or tool answer from there.
//
// A tool marked NeedsApproval parks the run on a gate named after the
// digest of the exact call (GateFor, CallDigest): the approver approves,
// rejects or edits the arguments, the answer is checked against the schema
// FlowOptions declares before anything is recorded, and the approval is
// logged with the principal the app's ResumeAuthenticator verified.
//
// Tool failures, unknown tools and malformed arguments are fed back to the
// model as error results and never fail the run. The transcript's growth is
// controlled by a lean tool-call log (ToolLogLean), a Compactor (Summarizer)
// and a one-time warning past WarnTranscriptBytes.
package agent
