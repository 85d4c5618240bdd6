// Package groupcommit is the store-independent half of a group-commit
// writer: a bounded queue of requests, leadership without a writer
// goroutine, bounded groups, and one acknowledgement per caller. The
// SQLite and PostgreSQL plugins plug their transactions into it through
// Committer; what a commit is (a transaction, a pipelined batch, how a
// refusal or a failed statement is judged) stays theirs.
//
// # Contract
//
// Submit queues one request and returns its own outcome. There is no
// writer goroutine: the caller that finds a leadership free becomes a
// leader and, on its own goroutine, calls Committer.Lead, which takes
// groups with Leadership.Next and commits each; the other callers wait for
// their result or for a leadership. So a lone caller commits at once, with
// no hand-off, and N concurrent callers share commits.
//
//   - Leadership is a token in a channel of capacity Limits.Leaders: at most
//     that many leaders commit at once.
//   - A group is cut at Limits.GroupRequests requests or Limits.GroupBytes
//     bytes, whichever comes first; a request larger than GroupBytes, or
//     submitted with SubmitAlone, forms a group of its own. Requests keep
//     their queue order within and across groups (retried ones first).
//   - A leader commits groups until its own request is done, and at most
//     Limits.ExtraGroups groups counted from the one that finished it (so
//     with 4, three more for others), so its caller's latency is bounded
//     while most hand-offs are still saved under load.
//   - The queue holds at most Limits.Queued requests; a caller finding it
//     full leads one group itself to make room, or waits (or gives up with
//     its context) while another leader does.
//   - A caller whose ctx ends while its request is still queued gets
//     ctx.Err(), and the request is never handed to a Committer. Once a
//     leader has taken it, the caller waits for the real outcome, so a nil
//     from Submit always means committed.
//   - Every request taken is acknowledged exactly once, by Request.Finish:
//     a failing commit fails each of its callers, with the error the
//     Committer gives each one.
//   - After Close, Submit returns store.ErrClosed; Close itself commits
//     everything still queued, as the last leader, before it returns.
package groupcommit
