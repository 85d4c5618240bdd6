package wire_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/projection"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// countingModels counts the queries that reach the store, so a test sees
// that a refused query read nothing.
type countingModels struct {
	store.ReadModelStore
	queries atomic.Int64
}

func (m *countingModels) Query(ctx context.Context, q store.ReadModelQuery) (store.ReadModelPage, error) {
	m.queries.Add(1)
	return m.ReadModelStore.Query(ctx, q)
}

// ordersProjection keeps one row per order execution: its last event's
// type as the indexed field "last", and that event's sequence as the doc.
func ordersProjection() projection.Projection {
	return projection.Projection{Name: "orders", Flows: []string{"order"}, Handle: func(tx *projection.Tx, e event.Envelope) error {
		doc, _ := json.Marshal(map[string]int64{"sequence": e.Sequence})
		tx.Put(store.ReadModel{Kind: "order", ID: e.ExecutionID, Fields: map[string]string{"last": string(e.Type)}, Doc: doc})
		return nil
	}}
}

// readModelEnv is a wire server whose read models an orders projection
// writes; its live queries are woken only by the runner (the poll is an
// hour), so every page a watch sends is one the runner's apply caused.
func readModelEnv(t *testing.T, tweak func(*wire.Options)) (*env, *projection.Runner, *countingModels, *wire.Client) {
	t.Helper()
	models := &countingModels{ReadModelStore: memstore.NewReadModelStore()}
	var r *projection.Runner
	e := newEnv(t, func(o *wire.Options) {
		var err error
		if r, err = projection.New(o.Events, models, ordersProjection()); err != nil {
			t.Fatal(err)
		}
		o.ReadModels, o.ReadModelChanges, o.ReadModelPoll = models, r, time.Hour
		if tweak != nil {
			tweak(o)
		}
	})
	c, err := wire.NewClient(e.srv.URL, wire.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return e, r, models, c
}

// nextPage receives the next page of w, failing the test if the watch ends.
func nextPage(t *testing.T, w *wire.ReadModelWatch) projection.QueryUpdate {
	t.Helper()
	u, ok := <-w.Pages()
	if !ok {
		t.Fatalf("the watch ended: %v", w.Err())
	}
	return u
}

// lastOf returns the "last" field of each row of a page, by id.
func lastOf(p store.ReadModelPage) map[string]string {
	out := map[string]string{}
	for _, row := range p.Rows {
		out[row.ID] = row.Fields["last"]
	}
	return out
}

// TestReadModelWatchDeliversEveryChangeInOrderAcrossAReconnect:
// readmodel.query returns a page and its digest; readmodel.watch holding
// that digest sends nothing until the page changes, then each changed
// page in order; a watch resumed with the last digest it received skips
// the page it holds and sends the next change first; one resumed with no
// digest is sent the current page at once; the raw stream frames each
// page as "id: <digest>", "event: page".
func TestReadModelWatchDeliversEveryChangeInOrderAcrossAReconnect(t *testing.T) {
	e, r, _, c := readModelEnv(t, nil)
	ctx := testCtx(t)
	q := wire.ReadModelQueryParams{Kind: "order"}
	empty, err := c.QueryReadModels(ctx, q)
	if err != nil || len(empty.Rows) != 0 || empty.Digest == "" {
		t.Fatalf("the first query: %+v, %v", empty, err)
	}
	w, err := c.WatchReadModels(ctx, q, empty.Digest)
	if err != nil {
		t.Fatal(err)
	}
	advance := func(body, id string) {
		t.Helper()
		e.rpc(t, body)
		if _, err := r.CatchUpExecution(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	advance(`{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"o-1","wait":true}}`, "o-1")
	parked := nextPage(t, w)
	if got := lastOf(parked.Page); len(got) != 1 || got["o-1"] != string(event.ExecutionSuspended) {
		t.Fatalf("the first change: %v (the held empty page must not be sent again)", got)
	}
	advance(`{"jsonrpc":"2.0","id":2,"method":"execution.resume","params":{"executionId":"o-1","eventType":"approve","payload":{"approved":true},"wait":true}}`, "o-1")
	done := nextPage(t, w)
	if got := lastOf(done.Page); got["o-1"] != string(event.ExecutionCompleted) || done.Digest == parked.Digest {
		t.Fatalf("the second change: %v (digest %s after %s)", got, done.Digest, parked.Digest)
	}
	w.Close()
	held := w.Last()
	if now, err := c.QueryReadModels(ctx, q); err != nil || held != done.Digest || now.Digest != held {
		t.Fatalf("Last() = %s, the delivered page's digest %s, the query's %s (%v)", held, done.Digest, now.Digest, err)
	}

	resumed, err := c.WatchReadModels(ctx, q, held)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	advance(`{"jsonrpc":"2.0","id":3,"method":"execution.start","params":{"flowId":"order","input":{"item":"y","qty":2},"executionId":"o-2","wait":true}}`, "o-2")
	if got := lastOf(nextPage(t, resumed).Page); len(got) != 2 || got["o-2"] != string(event.ExecutionSuspended) {
		t.Fatalf("after the reconnect the first page is %v: the held page was sent again or the change lost", got)
	}

	fresh, err := c.WatchReadModels(ctx, q, "")
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if got := lastOf(nextPage(t, fresh).Page); len(got) != 2 {
		t.Fatalf("a watch holding nothing starts with %v, want the current two rows", got)
	}

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+wire.Path,
		strings.NewReader(`{"jsonrpc":"2.0","id":4,"method":"readmodel.watch","params":{"kind":"order","where":{"last":"EXECUTION_COMPLETED"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if f := readFrames(t, bufio.NewReader(resp.Body), 1); !strings.HasPrefix(f[0], "id: ") ||
		!strings.Contains(f[0], "\nevent: page\ndata: {\"rows\":[{\"kind\":\"order\",\"id\":\"o-1\"") {
		t.Fatalf("the raw frame:\n%s", f[0])
	}
}

// TestReadModelQueriesRefuseBadInputAndReadNothing: an invalid cursor, a
// bad kind, an unknown param, a query AuthorizeQuery denies, a watch in a
// batch, and a server without read models are refused with typed codes
// before the store is read.
func TestReadModelQueriesRefuseBadInputAndReadNothing(t *testing.T) {
	deny := errors.New("tenant mismatch: not for the caller")
	e, _, models, c := readModelEnv(t, func(o *wire.Options) {
		o.AuthorizeQuery = func(_ context.Context, principal any, q store.ReadModelQuery) error {
			if q.Kind == "secret" {
				return deny
			}
			return nil
		}
	})
	ctx := testCtx(t)
	for name, tc := range map[string]struct {
		params wire.ReadModelQueryParams
		code   int
		field  string
	}{
		"invalid cursor": {wire.ReadModelQueryParams{Kind: "order", After: "bad\ncursor"}, wire.CodeInvalidParams, "after"},
		"bad kind":       {wire.ReadModelQueryParams{Kind: ""}, wire.CodeInvalidParams, "kind"},
		"denied":         {wire.ReadModelQueryParams{Kind: "secret"}, wire.CodeDenied, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, qerr := c.QueryReadModels(ctx, tc.params)
			_, werr := c.WatchReadModels(ctx, tc.params, "")
			for method, err := range map[string]error{"query": qerr, "watch": werr} {
				var we *wire.Error
				if !errors.As(err, &we) || we.Code != tc.code || we.Detail().Field != tc.field {
					t.Fatalf("%s: %v, want code %d with data.field %q", method, err, tc.code, tc.field)
				}
				if strings.Contains(we.Message, deny.Error()) {
					t.Fatalf("%s: the authorizer's words reached the caller: %s", method, we.Message)
				}
			}
			if n := models.queries.Load(); n != 0 {
				t.Fatalf("the refused queries read the store %d times", n)
			}
		})
	}
	if _, body := e.post(t, `{"jsonrpc":"2.0","id":1,"method":"readmodel.query","params":{"kind":"order","limt":5}}`); !strings.Contains(body, `"code":-32602`) ||
		!strings.Contains(body, "unknown param") {
		t.Fatalf("a misspelled param: %s", body)
	}
	if _, body := e.post(t, `[{"jsonrpc":"2.0","id":1,"method":"readmodel.watch","params":{"kind":"order"}}]`); !strings.Contains(body, "cannot be batched") {
		t.Fatalf("a watch in a batch: %s", body)
	}
	if n := models.queries.Load(); n != 0 {
		t.Fatalf("the refused requests read the store %d times", n)
	}

	plain := newEnv(t, nil)
	pc, err := wire.NewClient(plain.srv.URL, wire.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	_, qerr := pc.QueryReadModels(ctx, wire.ReadModelQueryParams{Kind: "order"})
	_, werr := pc.WatchReadModels(ctx, wire.ReadModelQueryParams{Kind: "order"}, "")
	for method, err := range map[string]error{"query": qerr, "watch": werr} {
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeNotConfigured || we.Detail().Field != "ReadModels" {
			t.Fatalf("%s on a server without read models: %v, want CodeNotConfigured naming ReadModels", method, err)
		}
	}
}
