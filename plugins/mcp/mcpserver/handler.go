package mcpserver

import (
	"context"
	"net/http"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// anonymous is the caller of an Insecure server without Authenticate.
const anonymous = "anonymous"

// Handler returns the MCP endpoint: the SDK's streamable HTTP handler
// behind this server's authentication. In order, per request:
//   - a path under /.well-known/ (OAuth discovery probes) is answered 404
//     before anything else: the server offers no OAuth, and a 401 there
//     would start a host's OAuth dance;
//   - Options.Authenticate verifies the request; a refusal is 401 with
//     WWW-Authenticate and nothing is read or started;
//   - the SDK serves the request against a view built for the caller:
//     tools/list shows only the flow tools whose Audiences admit the caller
//     (and resume), a tool outside them is unknown, and every call is
//     authorized by Options.Authorize before anything starts.
//
// The handler is stateless (SEP-2567): no MCP session outlives a request,
// so every request is authenticated on its own and none can ride another
// caller's session. The protocol version is negotiated by the SDK on
// initialize. The SDK's DNS-rebinding protection stays on: a request that
// reached a loopback address with a non-loopback Host is refused 403.
func (s *Server) Handler() http.Handler { return s.handler }

// callerViewKey carries the caller's view from the authentication layer to
// the SDK handler's getServer.
type callerViewKey struct{}

func (s *Server) buildHandler() http.Handler {
	mcp := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		v, _ := r.Context().Value(callerViewKey{}).(*sdk.Server)
		return v // nil (never, past serveHTTP) is the SDK's 400
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/.well-known/") {
			http.NotFound(w, r)
			return
		}
		c, ok := s.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
			http.Error(w, ErrUnauthenticated.Error(), http.StatusUnauthorized)
			return
		}
		ctx := context.WithValue(r.Context(), callerViewKey{}, s.viewFor(c))
		mcp.ServeHTTP(w, r.WithContext(ctx))
	})
}

// authenticate runs Options.Authenticate; a refusal or a caller without an
// id is not ok.
func (s *Server) authenticate(r *http.Request) (Caller, bool) {
	if s.opts.Authenticate == nil {
		return Caller{ID: anonymous}, true // only reachable when Insecure
	}
	c, err := s.opts.Authenticate(r)
	if err != nil || c.ID == "" {
		return Caller{}, false
	}
	return c, true
}

// viewFor builds the MCP server one request of c is served by: the tools c
// may see, each handler bound to c.
func (s *Server) viewFor(c Caller) *sdk.Server {
	v := sdk.NewServer(&sdk.Implementation{Name: s.opts.Name, Version: s.opts.Version}, nil)
	for _, t := range s.tools {
		if t.visibleTo(c) {
			v.AddTool(t.tool, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return s.callFlow(ctx, c, t, req.Params.Arguments), nil
			})
		}
	}
	v.AddTool(s.resume, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return s.callResume(ctx, c, req.Params.Arguments), nil
	})
	return v
}

// authorize asks Options.Authorize about one call.
func (s *Server) authorize(ctx context.Context, c Caller, tool string) error {
	if s.opts.Authorize == nil {
		return nil // only reachable when Insecure
	}
	if err := s.opts.Authorize(ctx, c, tool); err != nil {
		return &ToolDeniedError{Tool: tool, Caller: c.ID, Err: err}
	}
	return nil
}
