package workerhttp

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/event"
)

// The stable error codes of the worker protocol: a code never changes
// meaning. doc.go has the table with HTTP statuses.
const (
	CodeUnauthenticated      = "unauthenticated"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeBodyTooLarge         = "body_too_large"
	CodeInvalidPackage       = "invalid_package"
	CodeExecutionNotFound    = "execution_not_found"
	CodeResumeRefused        = "resume_refused"
	CodeUnknownFlow          = "unknown_flow"
	CodePayloadInvalid       = "payload_invalid"
	CodeFeatureDisabled      = "feature_disabled"
	CodeDenied               = "denied"
	CodeBusy                 = "busy"
	CodeUnavailable          = "unavailable"
	CodeDeadlineExceeded     = "deadline_exceeded"
	CodeInternal             = "internal"
)

// ErrorObject is the "error" member of every refusal's body.
type ErrorObject struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Reason is the ingress gate's loom.RefusalReason, for resume_refused
	// and for busy when the runtime said busy.
	Reason string `json:"reason,omitempty"`
}

// errorBody is a refusal's JSON body.
type errorBody struct {
	Error ErrorObject `json:"error"`
}

// errorFor maps an Execute error to its status and error object; internal
// reports an unmapped error, whose text is logged but never sent.
func errorFor(err error) (status int, obj ErrorObject, internal bool) {
	var (
		pkg     *dispatch.PackageError
		refused *loom.ResumeRefusedError
		invalid *loom.ResumePayloadValidationError
		denied  *loom.ExecutionDeniedError
		retry   dispatch.Retryable
	)
	switch {
	case errors.As(err, &pkg):
		return http.StatusBadRequest, ErrorObject{Code: CodeInvalidPackage, Message: "invalid execution package: " + pkg.Field + ": " + pkg.Reason}, false
	case errors.Is(err, event.ErrInvalidEnvelope):
		return http.StatusBadRequest, ErrorObject{Code: CodeInvalidPackage, Message: "invalid execution package: the runtime refused an id or a value"}, false
	case errors.As(err, &refused) && refused.Reason == loom.RefusedBusy:
		return http.StatusServiceUnavailable, ErrorObject{Code: CodeBusy, Message: "the execution is busy: dispatch again", Reason: string(refused.Reason)}, false
	case errors.As(err, &refused):
		return http.StatusConflict, ErrorObject{Code: CodeResumeRefused, Message: "resume refused: " + string(refused.Reason), Reason: string(refused.Reason)}, false
	case errors.As(err, &invalid):
		return http.StatusUnprocessableEntity, ErrorObject{Code: CodePayloadInvalid, Message: "the resume payload does not satisfy the gate's schema"}, false
	case errors.As(err, &denied):
		return http.StatusForbidden, ErrorObject{Code: CodeDenied, Message: "the runtime's authorizer denied the " + denied.Action}, false
	case errors.Is(err, loom.ErrUnknownFlow):
		return http.StatusUnprocessableEntity, ErrorObject{Code: CodeUnknownFlow, Message: "this worker has no such flow registered"}, false
	case errors.Is(err, loom.ErrExecutionNotFound):
		return http.StatusNotFound, ErrorObject{Code: CodeExecutionNotFound, Message: "no such execution"}, false
	case errors.Is(err, loom.ErrFeatureDisabled):
		return http.StatusUnprocessableEntity, ErrorObject{Code: CodeFeatureDisabled, Message: "a kernel feature the execution needs is disabled on this worker"}, false
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, ErrorObject{Code: CodeDeadlineExceeded, Message: "the execution did not settle within the server's timeout; it may still run: dispatch again to read it"}, false
	case errors.Is(err, context.Canceled), errors.Is(err, loom.ErrRuntimeClosed):
		return http.StatusServiceUnavailable, ErrorObject{Code: CodeUnavailable, Message: "the worker is stopping: dispatch again"}, false
	case errors.As(err, &retry) && retry.Retryable():
		return http.StatusServiceUnavailable, ErrorObject{Code: CodeBusy, Message: "the worker cannot run the package now: dispatch again"}, false
	}
	return http.StatusInternalServerError, ErrorObject{Code: CodeInternal, Message: "internal error"}, true
}

// RemoteError is a worker server's refusal as RemoteWorker returns it:
// StatusCode is the HTTP status, Code, Message and Reason the body's error
// object (Code is empty when the body was not one, say from a proxy).
// ExecutionID is the package's.
//
// Retryable reports whether dispatching again may succeed: true for a 5xx,
// 408 and 429, false for every other status. Unwrap yields the kernel's own
// error for the codes that have one (see the package doc), so errors.Is and
// errors.As see through the network.
type RemoteError struct {
	StatusCode  int
	Code        string
	Message     string
	Reason      string
	ExecutionID string
}

func (e *RemoteError) Error() string {
	msg := "workerhttp: worker answered " + strconv.Itoa(e.StatusCode)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Retryable reports true for a 5xx, 408 or 429 answer.
func (e *RemoteError) Retryable() bool {
	return e.StatusCode >= 500 || e.StatusCode == http.StatusRequestTimeout || e.StatusCode == http.StatusTooManyRequests
}

// Unwrap rebuilds the kernel error the code stands for, or returns nil.
func (e *RemoteError) Unwrap() error {
	switch e.Code {
	case CodeInvalidPackage:
		return dispatch.ErrInvalidPackage
	case CodeUnknownFlow:
		return loom.ErrUnknownFlow
	case CodeExecutionNotFound:
		return loom.ErrExecutionNotFound
	case CodeFeatureDisabled:
		return loom.ErrFeatureDisabled
	case CodeUnauthenticated:
		return ErrUnauthenticated
	case CodeResumeRefused, CodeBusy:
		if e.Reason != "" {
			return &loom.ResumeRefusedError{ExecutionID: e.ExecutionID, Reason: loom.RefusalReason(e.Reason), Detail: e.Message}
		}
	case CodePayloadInvalid:
		return &loom.ResumePayloadValidationError{ExecutionID: e.ExecutionID, Detail: e.Message}
	case CodeDenied:
		return &loom.ExecutionDeniedError{ExecutionID: e.ExecutionID, Reason: e.Message}
	}
	return nil
}

// TransportError is a request that got no HTTP answer (refused connection,
// reset, TLS failure): the worker may or may not have run the package, so
// it is retryable — packages are idempotent (see package dispatch).
type TransportError struct {
	ExecutionID string
	Err         error
}

func (e *TransportError) Error() string { return "workerhttp: sending the package: " + e.Err.Error() }

// Unwrap exposes the transport's error.
func (e *TransportError) Unwrap() error { return e.Err }

// Retryable reports true.
func (e *TransportError) Retryable() bool { return true }

// ProtocolError is a 200 answer that is not a result for the package sent
// (not JSON, over ClientOptions.MaxResponseBytes, another execution id, no
// status): the server is not a conforming worker. Not retryable.
type ProtocolError struct {
	ExecutionID string
	Reason      string
}

func (e *ProtocolError) Error() string {
	return "workerhttp: execution " + strconv.Quote(e.ExecutionID) + ": not a worker result: " + e.Reason
}

// Retryable reports false.
func (e *ProtocolError) Retryable() bool { return false }
