package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/loom-kernel/loom/projection"
	"github.com/loom-kernel/loom/store"
)

// ReadModelQueryParams are the params of readmodel.query and readmodel.watch
// (1.3.0): a store.ReadModelQuery. Kind is required; Where selects rows by
// equality on their indexed fields; After is the cursor a page's next gave
// (keyset paging by row id); Limit caps the page (default and maximum as
// the store's: store.DefaultReadModelQueryLimit, store.MaxReadModelQueryLimit).
type ReadModelQueryParams struct {
	Kind  string            `json:"kind"`
	Where map[string]string `json:"where,omitempty"`
	After string            `json:"after,omitempty"`
	Limit int               `json:"limit,omitempty"`
}

func (p ReadModelQueryParams) query() store.ReadModelQuery {
	return store.ReadModelQuery{Kind: p.Kind, Where: p.Where, After: p.After, Limit: p.Limit}
}

// ReadModelQueryResult is the result of readmodel.query: one page of rows
// in id order, next (the After of the following page, absent on the last),
// and the page's digest (projection.PageDigest): hold it and pass it to
// readmodel.watch to be sent the page only once it changes.
type ReadModelQueryResult struct {
	Rows   []store.ReadModel `json:"rows"`
	Next   string            `json:"next,omitempty"`
	Digest string            `json:"digest"`
}

// readModelQuery checks and admits a read-model query: the server serves
// read models (Options.ReadModels), the query is valid (the store's own
// check, so an invalid kind, field or cursor is refused before anything is
// read), and Options.AuthorizeQuery admits it.
func (h *handler) readModelQuery(ctx context.Context, method string, p ReadModelQueryParams) (store.ReadModelQuery, error) {
	if h.opts.ReadModels == nil {
		return store.ReadModelQuery{}, newError(CodeNotConfigured, "this server serves no read models: "+method+
			" needs wire.Options.ReadModels (the app's store.ReadModelStore); nothing was read",
			map[string]any{"field": "ReadModels", "need": method})
	}
	q, err := store.ValidateReadModelQuery(p.query())
	if err != nil {
		return store.ReadModelQuery{}, err
	}
	if h.opts.AuthorizeQuery != nil {
		if err := h.opts.AuthorizeQuery(ctx, PrincipalFrom(ctx), q); err != nil {
			return store.ReadModelQuery{}, newError(CodeDenied, "a query of read models of kind "+strconv.Quote(q.Kind)+
				" denied by the server's AuthorizeQuery", map[string]any{"action": method})
		}
	}
	return q, nil
}

func (h *handler) queryReadModels(ctx context.Context, p ReadModelQueryParams) (ReadModelQueryResult, error) {
	q, err := h.readModelQuery(ctx, MethodReadModelQuery, p)
	if err != nil {
		return ReadModelQueryResult{}, err
	}
	page, err := h.opts.ReadModels.Query(ctx, q)
	if err != nil {
		return ReadModelQueryResult{}, err
	}
	if page.Rows == nil {
		page.Rows = []store.ReadModel{}
	}
	return ReadModelQueryResult{Rows: page.Rows, Next: page.Next, Digest: projection.PageDigest(page)}, nil
}

// serveReadModelWatch answers readmodel.watch: a live query
// (projection.WatchQuery) streamed as server-sent events, the page as it
// stands first, then the page again each time it changes, each as
// "event: page" with the page's digest as its id. A Last-Event-ID header
// (the digest of the page the client holds) skips the first page when it
// is unchanged. Refusals before the stream starts are JSON-RPC errors;
// later failures an "error" event, as for execution.subscribe.
func (h *handler) serveReadModelWatch(ctx context.Context, w http.ResponseWriter, r *http.Request, req request) {
	fail := func(err error) {
		if req.ID == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.writeJSON(w, http.StatusOK, errorResponse(req.ID, h.wireError(req.Method, err)))
	}
	var p ReadModelQueryParams
	if err := decodeParams(req.Params, &p, true); err != nil {
		fail(err)
		return
	}
	q, err := h.readModelQuery(ctx, req.Method, p)
	if err != nil {
		fail(err)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch, err := projection.WatchQuery(ctx, h.opts.ReadModels, q, projection.LiveOptions{
		Held: r.Header.Get("Last-Event-ID"), Poll: h.opts.ReadModelPoll, Changes: h.opts.ReadModelChanges})
	if err != nil {
		fail(err)
		return
	}
	defer watch.Close()
	send, ok := openStream(w, "read-model watch")
	if !ok {
		return
	}
	pumpItems(ctx, h, req.Method, watch.Updates(), watch.Err, send, pageFrame)
}

// pageFrame renders a read-model page as an SSE event: its digest as the
// id, "page" as the name, the page's JSON ({rows, next?}) on one data line.
func pageFrame(u projection.QueryUpdate) (string, error) {
	if u.Page.Rows == nil {
		u.Page.Rows = []store.ReadModel{}
	}
	b, err := marshalValid(u.Page)
	if err != nil {
		return "", err
	}
	return "id: " + u.Digest + "\nevent: page\ndata: " + string(b) + "\n\n", nil
}

// QueryReadModels calls readmodel.query: one page of read models.
func (c *Client) QueryReadModels(ctx context.Context, p ReadModelQueryParams) (ReadModelQueryResult, error) {
	var res ReadModelQueryResult
	return res, c.Call(ctx, MethodReadModelQuery, p, &res)
}

// ReadModelWatch is a readmodel.watch stream on the client side: the
// query's page as it stands first, then each changed page, until it is
// closed, its context ends, or the stream fails.
type ReadModelWatch struct {
	s *stream[projection.QueryUpdate]
}

// Pages is closed when the watch ends; then Err says why.
func (w *ReadModelWatch) Pages() <-chan projection.QueryUpdate { return w.s.items }

// Err returns why the watch ended, as Subscription.Err does. Call it once
// Pages is closed.
func (w *ReadModelWatch) Err() error {
	w.s.wait()
	return w.s.err
}

// Last returns the digest of the last page delivered, "" before any: pass
// it as held to WatchReadModels again to go on where it ended.
func (w *ReadModelWatch) Last() string {
	w.s.wait()
	return w.s.lastID
}

// Close ends the watch and waits for its goroutine to exit.
func (w *ReadModelWatch) Close() { w.s.stop() }

// WatchReadModels calls readmodel.watch. held is the digest of the page the
// caller holds ("" for none; ReadModelQueryResult.Digest or
// ReadModelWatch.Last): the server then sends the page only once it
// differs. A refusal is returned here as an *Error; later failures end the
// watch and are reported by its Err.
func (c *Client) WatchReadModels(ctx context.Context, p ReadModelQueryParams, held string) (*ReadModelWatch, error) {
	var header map[string]string
	if held != "" {
		header = map[string]string{"Last-Event-ID": held}
	}
	s, err := dialStream(c, ctx, MethodReadModelWatch, p, header, "page", func(id string, data []byte) (projection.QueryUpdate, int64, error) {
		var page store.ReadModelPage
		if err := json.Unmarshal(data, &page); err != nil {
			return projection.QueryUpdate{}, 0, fmt.Errorf("wire: a read-model page on the stream: %w", err)
		}
		return projection.QueryUpdate{Page: page, Digest: id}, -1, nil
	})
	if err != nil {
		return nil, err
	}
	return &ReadModelWatch{s: s}, nil
}
