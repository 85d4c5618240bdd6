package telemetry

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HTTPOptions configures HTTPMiddleware. The zero value is the default
// set: W3C tracecontext and baggage, slog.Default().
type HTTPOptions struct {
	// Propagator reads the incoming headers (nil: W3C tracecontext and
	// baggage, as New's default). Use the one given to Options.Propagator.
	Propagator propagation.TextMapPropagator
	// Logger receives the warning about a traceparent that does not
	// parse (nil: slog.Default()).
	Logger *slog.Logger
}

// malformedWarnEvery bounds how often HTTPMiddleware warns about
// malformed traceparent headers: a client sending them on every request
// costs one log line per interval, not one per request.
const malformedWarnEvery = time.Minute

// HTTPMiddleware extracts the trace context of an incoming request's
// headers into its context, so a handler calling the runtime (wire.Handler,
// or one calling Runtime.Start or Resume) continues the caller's trace: the
// operation's span is a child of the caller's, and the execution records it.
// It starts no span of its own (wrap it in otelhttp for server spans). A
// traceparent that does not parse is ignored — the request goes on with no
// remote parent, never an error response — and logged as a warning, at most
// once a minute (later ones in the minute are counted in the next warning).
func HTTPMiddleware(next http.Handler, opts HTTPOptions) http.Handler {
	prop := opts.Propagator
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	w := &malformedWarner{log: log}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		if tp := r.Header.Get("Traceparent"); tp != "" && !trace.SpanContextFromContext(ctx).IsRemote() {
			w.warn(tp, r)
		}
		next.ServeHTTP(rw, r.WithContext(ctx))
	})
}

// malformedWarner rate-limits the malformed-traceparent warning.
type malformedWarner struct {
	log        *slog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int64
}

// maxLoggedHeader bounds how much of a malformed header is logged (a
// valid traceparent is 55 bytes).
const maxLoggedHeader = 64

func (m *malformedWarner) warn(header string, r *http.Request) {
	now := time.Now()
	m.mu.Lock()
	if !m.last.IsZero() && now.Sub(m.last) < malformedWarnEvery {
		m.suppressed++
		m.mu.Unlock()
		return
	}
	m.last = now
	suppressed := m.suppressed
	m.suppressed = 0
	m.mu.Unlock()
	if len(header) > maxLoggedHeader {
		header = header[:maxLoggedHeader]
	}
	m.log.Warn("telemetry: ignoring a traceparent header that does not parse; the request starts a new trace",
		"traceparent", header, "remote", r.RemoteAddr, "path", r.URL.Path, "suppressedSinceLast", suppressed)
}
