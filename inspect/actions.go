package inspect

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/loom-kernel/loom/wire"
)

// Actor is what the inspector acts through (Options.Actions): the wire ABI
// methods of a running app that its actions call. *wire.Client is one; a
// refusal it returns as a *wire.Error reaches the page with its code and
// data.
type Actor interface {
	Gate(ctx context.Context, p wire.GateParams) (wire.GateResult, error)
	Resume(ctx context.Context, p wire.ResumeParams) (wire.ResumeResult, error)
	Cancel(ctx context.Context, p wire.CancelParams) (wire.CancelResult, error)
	Fork(ctx context.Context, p wire.ForkParams) (wire.ForkResult, error)
	ResumeAs(ctx context.Context, p wire.ResumeAsParams) (wire.ResumeAsResult, error)
	Resolve(ctx context.Context, p wire.ResolveParams) (wire.ResolveResult, error)
}

var _ Actor = (*wire.Client)(nil)

// Limits of the action endpoints.
const (
	// MaxActionBytes caps an action's body; a bigger one is refused (413)
	// and nothing is sent to the app.
	MaxActionBytes = 1 << 20
	// ActionTimeout bounds one call to the app; past it the page is told
	// the action may still have taken effect.
	ActionTimeout = time.Minute
)

// The bodies of the action endpoints: members named exactly so, each at
// most once, and no other.
type (
	resumeBody struct {
		ID        string         `json:"id"`
		EventType string         `json:"eventType"`
		Payload   jsontext.Value `json:"payload"`
	}
	cancelBody struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
	}
	forkBody struct {
		ID       string `json:"id"`
		At       *int64 `json:"at"`
		Simulate bool   `json:"simulate"`
	}
	resumeAsBody struct {
		ID     string         `json:"id"`
		FlowID string         `json:"flowId"`
		Input  jsontext.Value `json:"input"`
	}
	resolveBody struct {
		ID      string         `json:"id"`
		StepID  string         `json:"stepId"`
		Attempt *int64         `json:"attempt"`
		Done    bool           `json:"done"`
		Output  jsontext.Value `json:"output"`
	}
)

// actionRoutes registers GET /api/session and, with Options.Actions, the
// gate and the action endpoints.
func (in *Inspector) actionRoutes() {
	in.mux.HandleFunc("GET /api/session", in.sessionInfo)
	if in.opts.Actions == nil {
		return
	}
	in.mux.HandleFunc("GET /api/gate", in.gate)
	actionRoute(in, "resume", "id, eventType and payload", func(b resumeBody) string {
		return cmp.Or(requiredMember("id", b.ID), requiredMember("eventType", b.EventType))
	}, func(ctx context.Context, act Actor, b resumeBody) (any, error) {
		return act.Resume(ctx, wire.ResumeParams{ExecutionID: b.ID, EventType: b.EventType, Payload: rawParam(b.Payload)})
	})
	actionRoute(in, "cancel", "id and reason", func(b cancelBody) string { return requiredMember("id", b.ID) },
		func(ctx context.Context, act Actor, b cancelBody) (any, error) {
			return act.Cancel(ctx, wire.CancelParams{ExecutionID: b.ID, Reason: b.Reason})
		})
	actionRoute(in, "fork", "id, at and simulate", func(b forkBody) string {
		if b.At == nil || *b.At < 0 {
			return cmp.Or(requiredMember("id", b.ID), "at is required: the last sequence the fork copies (0 or more)")
		}
		return requiredMember("id", b.ID)
	}, func(ctx context.Context, act Actor, b forkBody) (any, error) {
		return act.Fork(ctx, wire.ForkParams{ExecutionID: b.ID, At: b.At, Simulate: b.Simulate})
	})
	actionRoute(in, "resume-as", "id, flowId and input", func(b resumeAsBody) string { return requiredMember("id", b.ID) },
		func(ctx context.Context, act Actor, b resumeAsBody) (any, error) {
			return act.ResumeAs(ctx, wire.ResumeAsParams{ExecutionID: b.ID, FlowID: b.FlowID, Input: rawParam(b.Input)})
		})
	actionRoute(in, "resolve", "id, stepId, attempt, done and output", func(b resolveBody) string {
		switch {
		case b.Attempt == nil:
			return cmp.Or(requiredMember("id", b.ID), requiredMember("stepId", b.StepID), "attempt is required: the attempt the park is in doubt about")
		case !b.Done && b.Output != nil && string(b.Output) != "null":
			return "output goes with done: true (the step acted, and this is its output); without done the step runs again"
		}
		return cmp.Or(requiredMember("id", b.ID), requiredMember("stepId", b.StepID))
	}, func(ctx context.Context, act Actor, b resolveBody) (any, error) {
		p := wire.ResolveParams{ExecutionID: b.ID, StepID: b.StepID, Attempt: b.Attempt, Done: b.Done}
		if b.Done {
			p.Output = rawParam(b.Output)
		}
		return act.Resolve(ctx, p)
	})
}

// acts reports a request for an action endpoint, the only POSTs the
// inspector takes, and only with Options.Actions.
func (in *Inspector) acts(r *http.Request) bool {
	return in.opts.Actions != nil && r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/act/")
}

// actionRoute registers POST /api/act/<name>: the CSRF checks, then the body
// decoded strictly into B (members lists its members, for the refusal),
// then check (a refusal, or ""), and only then call, whose result is
// answered as JSON. Every refusal before call sends nothing to the app.
func actionRoute[B any](in *Inspector, name, members string, check func(B) string, call func(context.Context, Actor, B) (any, error)) {
	in.mux.HandleFunc("POST /api/act/"+name, func(w http.ResponseWriter, r *http.Request) {
		c := callerOf(r)
		if why := csrfRefusal(r, c); why != "" {
			in.writeError(w, http.StatusForbidden, why)
			return
		}
		var b B
		if status, why := decodeBody(w, r, &b, name, members); why != "" {
			in.writeError(w, status, why)
			return
		}
		if why := check(b); why != "" {
			in.writeError(w, http.StatusBadRequest, why+"; nothing was sent to the app")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), ActionTimeout)
		defer cancel()
		res, err := call(ctx, in.opts.Actions, b)
		in.opts.Logger.Info("inspect: action", "action", name, "principal", c.principal, "bearer", c.bearer, "error", err)
		if err != nil {
			in.appFailed(w, err)
			return
		}
		in.writeJSON(w, res)
	})
}

// gate is GET /api/gate?id=: what the execution is parked on, the JSON
// Schema of the answer, its timeout and who may answer, as the app's
// execution.gate answers it.
func (in *Inspector) gate(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		in.writeError(w, http.StatusBadRequest, "id is required: the execution whose gate to read")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ActionTimeout)
	defer cancel()
	res, err := in.opts.Actions.Gate(ctx, wire.GateParams{ExecutionID: id})
	if err != nil {
		in.appFailed(w, err)
		return
	}
	in.writeJSON(w, res)
}

// decodeBody reads an action's body into v: Content-Type application/json
// (else 415), at most MaxActionBytes (else 413), one JSON object whose
// members are v's, named exactly, each once, in valid UTF-8 (else 400).
func decodeBody(w http.ResponseWriter, r *http.Request, v any, name, members string) (int, string) {
	const nothing = "; nothing was sent to the app"
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, "the body must be JSON, sent with Content-Type: application/json" + nothing
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxActionBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "the body is over " + strconv.Itoa(MaxActionBytes) + " bytes" + nothing
	case err != nil:
		return http.StatusBadRequest, "the body could not be read" + nothing
	}
	shape := "the body of /api/act/" + name + " is a JSON object with " + members
	if len(b) == 0 || jsontext.Value(b).Kind() != '{' {
		return http.StatusBadRequest, shape + nothing
	}
	err = jsonv2.Unmarshal(b, v, jsonv2.RejectUnknownMembers(true))
	if err == nil {
		return 0, ""
	}
	var se *jsonv2.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &se) && errors.Is(se.Err, jsonv2.ErrUnknownName):
		return http.StatusBadRequest, shape + ", and no other member (member names are exact): " + quotePointer(se.JSONPointer) + " is unknown" + nothing
	case errors.Is(err, jsontext.ErrDuplicateName):
		return http.StatusBadRequest, shape + ", each member once: " + quotePointer(pointerOf(err)) + " is given twice" + nothing
	case errors.As(err, &se):
		return http.StatusBadRequest, shape + ": " + quotePointer(se.JSONPointer) + " has the wrong type" + nothing
	case errors.As(err, &syn):
		return http.StatusBadRequest, "the body is not JSON in valid UTF-8 (at byte " + strconv.FormatInt(syn.ByteOffset, 10) + ")" + nothing
	}
	return http.StatusBadRequest, shape + nothing
}

func pointerOf(err error) jsontext.Pointer {
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		return syn.JSONPointer
	}
	return ""
}

// quotePointer quotes where in the body a refusal is, cut to 80 bytes.
func quotePointer(p jsontext.Pointer) string {
	s := string(p)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strconv.Quote(s)
}

// requiredMember refuses an empty member.
func requiredMember(member, value string) string {
	if value == "" {
		return member + " is required"
	}
	return ""
}

// rawParam is a decoded JSON value as the wire params take it: nil when absent.
func rawParam(v jsontext.Value) json.RawMessage {
	if v == nil {
		return nil
	}
	return json.RawMessage(v)
}

// appRefusal is the body of an answer the app refused: the app's message,
// its wire code and its data, verbatim.
type appRefusal struct {
	Error string          `json:"error"`
	Code  int             `json:"code"`
	Data  json.RawMessage `json:"data"`
}

// appFailed answers what the app (or the way to it) said: a *wire.Error
// with the status its code maps to (StatusOfCode) and its message (ours
// when the app refused the inspector's own token), code and data; a
// failure to reach the app with 502 (504 past ActionTimeout), its cause
// logged, not sent.
func (in *Inspector) appFailed(w http.ResponseWriter, err error) {
	var we *wire.Error
	switch {
	case errors.As(err, &we) && we.Code == wire.CodeUnauthenticated:
		in.write(w, StatusOfCode(we.Code), appRefusal{Error: "the app refused the inspector's own token: serve the inspector with the bearer token " +
			"of the app's wire ABI (loom inspect --app-token); nothing was recorded", Code: we.Code, Data: we.Data})
	case errors.As(err, &we):
		in.write(w, StatusOfCode(we.Code), appRefusal{Error: we.Message, Code: we.Code, Data: we.Data})
	case errors.Is(err, context.DeadlineExceeded):
		in.writeError(w, http.StatusGatewayTimeout, "the app did not answer within "+ActionTimeout.String()+
			"; the action may still have taken effect: the timeline shows what was recorded")
	default:
		in.opts.Logger.Error("inspect: calling the app", "error", err)
		in.writeError(w, http.StatusBadGateway, "the inspector could not reach the app (its log has the cause); "+
			"the action may or may not have taken effect: the timeline shows what was recorded")
	}
}

// StatusOfCode is the HTTP status with which the inspector passes on an
// app's refusal of wire code code:
//
//	404  execution not found, unknown flow
//	409  the execution's state refuses it: the resume refusals (not
//	     suspended, gate mismatch, terminal, busy, …), execution exists,
//	     code mismatch, send refused, a conflicting writer
//	422  the answer or the params are wrong: payload fails the gate's
//	     schema, invalid input or params, sequence past the end of the log
//	403  denied by the app's Authorizer or its ResumeAuthenticator
//	413  request or payload too large
//	501  the app's runtime lacks the feature (not configured, no subscribe)
//	502  the app refused the inspector's own token (check --app-token),
//	     failed a durable append, or failed inside (internal, parse error)
//	503  the app is shutting down
//	504  the app's deadline passed, or its call was cancelled: the action
//	     may still have taken effect
func StatusOfCode(code int) int {
	switch code {
	case wire.CodeExecutionNotFound, wire.CodeUnknownFlow:
		return http.StatusNotFound
	case wire.CodeResumeRefused, wire.CodeKernelEventType, wire.CodeNotSuspended, wire.CodeGateMismatch, wire.CodeNotRecoverable,
		wire.CodeNullAfterFailure, wire.CodeTimerNotAllowed, wire.CodeTerminal, wire.CodeBusy, wire.CodeExecutionExists,
		wire.CodeFlowCodeMismatch, wire.CodeSendRefused, wire.CodeConflict:
		return http.StatusConflict
	case wire.CodePayloadInvalid, wire.CodeInvalidInput, wire.CodeInvalidParams, wire.CodeSequenceOutOfRange:
		return http.StatusUnprocessableEntity
	case wire.CodeDenied, wire.CodeResumeUnauthorized:
		return http.StatusForbidden
	case wire.CodeRequestTooLarge, wire.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case wire.CodeNotConfigured, wire.CodeSubscribeUnsupported:
		return http.StatusNotImplemented
	case wire.CodeUnavailable:
		return http.StatusServiceUnavailable
	case wire.CodeDeadlineExceeded, wire.CodeCancelled:
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}
