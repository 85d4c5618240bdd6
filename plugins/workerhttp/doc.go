// Package workerhttp places executions on stateless workers over HTTP: the
// worker server (the container entrypoint of a remote or Cloud Run worker,
// plugin-worker-server in the original) runs one dispatch.ExecutionPackage
// per POST /execute on an injected dispatch.WorkerRuntime, and RemoteWorker
// (plugin-worker-remote) is the dispatch.WorkerRuntime that sends packages to
// it (architecture §5.5, spec §6).
//
// A worker node wires its runtime over the shared stores and serves it:
//
//	rt, _ := loom.New(loom.Config{Events: pg.Events, Flows: flows})
//	srv, err := workerhttp.NewServer(&dispatch.LocalWorker{Runtime: rt},
//		workerhttp.Options{Authenticate: workerhttp.BearerToken(token)})
//	ln, err := workerhttp.Listen("10.0.0.5:8080", workerhttp.AllowRemote())
//	err = srv.Serve(ctx, ln)
//
// and an orchestrator dispatches onto it:
//
//	w, err := workerhttp.NewRemoteWorker("https://worker-1.internal", workerhttp.ClientOptions{Token: token})
//	d := &dispatch.LocalDispatcher{Worker: w, MaxConcurrent: 32}
//	s, err := dispatch.NewSupervisingDispatcher(d, dispatch.SupervisorOptions{})
//	res, err := s.Dispatch(ctx, pkg)
//
// # Protocol
//
// POST /execute with Content-Type application/json and the package's JSON
// (dispatch.ExecutionPackage, decoded strictly: an unknown or misspelled
// field is refused) answers 200 with the dispatch.ExecutionResult's JSON once
// the execution has parked or ended. A flow that fails is a 200 with status
// "failed". Every refusal is a non-200 with the body
//
//	{"error": {"code": "<stable code>", "message": "<what and why>", "reason": "<refusal reason, for resume_refused>"}}
//
//	HTTP  code                    meaning                                      retryable
//	401   unauthenticated         Options.Authenticate refused the request     no
//	404   not_found               another path than /execute                   no
//	405   method_not_allowed      another method than POST                     no
//	415   unsupported_media_type  a body that is not application/json          no
//	413   body_too_large          a body over Options.MaxBodyBytes             no
//	400   invalid_package         not a valid package (dispatch.ErrInvalidPackage)  no
//	404   execution_not_found     resume/recover of a missing execution        no
//	409   resume_refused          the ingress gate refused (reason: gate-mismatch, terminal…)  no
//	422   unknown_flow            the worker has no such flow                  no
//	422   payload_invalid         the answer fails the gate's resume schema    no
//	422   feature_disabled        a kernel feature the flow needs is off       no
//	403   denied                  the runtime's Authorizer denied it           no
//	503   busy                    retry: the worker or the execution is busy   yes
//	503   unavailable             the runtime is closing, or the request ended yes
//	504   deadline_exceeded       not settled within Options.Timeout           yes
//	500   internal                anything unmapped (cause logged, not sent)   yes
//
// Messages are built from the errors' typed fields: they never echo a
// payload, credentials or an authenticator's words.
//
// RemoteWorker returns a non-200 as *RemoteError: Retryable() is true for a
// 5xx (and 408, 429), false for every other 4xx, which is what
// dispatch.IsRetryable and the SupervisingDispatcher honour; and it unwraps
// to the kernel's own error where there is one (loom.ErrUnknownFlow,
// loom.ErrExecutionNotFound, *loom.ResumeRefusedError with its reason,
// *loom.ResumePayloadValidationError, *loom.ExecutionDeniedError,
// dispatch.ErrInvalidPackage), so errors.Is and errors.As work across the
// network as they do in process. A connection that fails is a retryable
// *TransportError; a 200 that is not a result for the package is a
// *ProtocolError.
//
// # Security defaults
//
// NewServer refuses to build a server without Options.Authenticate unless
// Options.Insecure is set explicitly (*OptionsError); authentication runs
// before the path, the method or a byte of the body is looked at. Listen
// binds 127.0.0.1 unless given an explicit address and AllowRemote, and
// Serve refuses to serve an insecure server on a non-loopback listener.
// Bodies are capped (1 MiB by default, which every valid package fits: see
// dispatch.MaxPayloadBytes). RemoteWorker refuses to send credentials over
// plain http to a non-loopback host unless told to, and never follows
// redirects, so a token is never replayed to another host.
package workerhttp
