// Package loopback keeps network listeners on loopback unless a caller
// explicitly allows otherwise. The wire ABI and the worker server both bind
// through Listen, so "no address" and ":port" never mean every interface,
// and a remote address is a decision written in code (their AllowRemote
// options), not an accident of configuration.
package loopback
