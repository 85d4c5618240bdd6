// Package loopback keeps network listeners on loopback unless a caller
// explicitly allows otherwise. The wire ABI, the worker server and the A2A
// and MCP servers bind through it (Listen, IsHost, IsAddr; Serve runs an
// HTTP server on a listener until its context ends), so "no address" and
// ":port" never mean every interface, and a remote address is a decision
// written in code (their AllowRemote options), not an accident of
// configuration.
package loopback
