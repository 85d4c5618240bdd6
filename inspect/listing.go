package inspect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Polling of the live list (Options.ListPoll).
const (
	DefaultListPoll = time.Second
	MinListPoll     = 10 * time.Millisecond
)

// Listing is one execution of /api/executions, and of loom ls --json: the
// store's listing (executionId, workflowId, and length, the number of
// events in its log) and its folded status, sequence and updatedAt, the
// gate it is parked on, and its fork lineage as the state's _forkChain
// holds it (forkChain). Every tool names them so.
type Listing struct {
	store.ExecutionInfo
	Status      fold.Status     `json:"status"`
	Sequence    int64           `json:"sequence"`
	UpdatedAt   int64           `json:"updatedAt"`
	SuspendedOn string          `json:"suspendedOn,omitempty"`
	ForkChain   json.RawMessage `json:"forkChain,omitempty"`
	// Parent is the parent link of a child execution ({executionId, name}).
	Parent json.RawMessage `json:"parent,omitempty"`
	// Tenant is the tenant recorded with the starting principal.
	Tenant string `json:"tenant,omitempty"`
}

// ListingOf is the Listing of an execution the store listed as info, whose
// latest folded state is st.
func ListingOf(info store.ExecutionInfo, st fold.State) Listing {
	l := Listing{ExecutionInfo: info, Status: st.Status, Sequence: st.Sequence, UpdatedAt: st.UpdatedAt,
		ForkChain: st.Variables.ForkChain, Parent: st.Variables.Parent, Tenant: store.TenantOfPrincipal(st.Variables.Principal)}
	if st.Status == fold.StatusSuspended && st.Variables.SuspendedOn != nil {
		l.SuspendedOn = st.Variables.SuspendedOn.On
	}
	return l
}

// listRoutes registers the list's API.
func (in *Inspector) listRoutes() {
	in.mux.HandleFunc("GET /api/executions", in.executions)
	in.mux.HandleFunc("GET /api/executions/live", in.liveExecutions)
}

func (in *Inspector) executions(w http.ResponseWriter, r *http.Request) {
	q, ok := in.listQueryOf(w, r)
	if !ok {
		return
	}
	page, _, err := in.listPage(r.Context(), q, nil)
	if err != nil {
		in.fail(w, err)
		return
	}
	in.writeJSON(w, page)
}

// listQuery is the query of /api/executions and of its live form: a page
// of the store's listing after a cursor, filtered by tenant.
type listQuery struct {
	after, tenant string
	limit         int
}

func (in *Inspector) listQueryOf(w http.ResponseWriter, r *http.Request) (listQuery, bool) {
	limit, ok := in.intParam(w, r, "limit", DefaultExecutionsPage, MaxExecutionsPage)
	q := r.URL.Query()
	return listQuery{after: q.Get("after"), tenant: q.Get("tenant"), limit: limit}, ok
}

// executionsPage is the body of /api/executions and the data of a live
// list's frames.
type executionsPage struct {
	Executions []Listing `json:"executions"`
	Next       string    `json:"next,omitempty"`
}

// listPage lists one page of executions with their folded status. known
// holds listings from an earlier call, by the store's listing: a log only
// grows, so an execution listed again with the same flow and length has
// the same folded state and is not refolded. (An execution deleted and
// re-created with the same flow and length between two calls keeps its old
// listing until its log grows.) listPage returns the page and the listings
// to pass as known next time: those of this page only, so they never
// outgrow a page.
func (in *Inspector) listPage(ctx context.Context, q listQuery, known map[store.ExecutionInfo]Listing) (executionsPage, map[store.ExecutionInfo]Listing, error) {
	listed, err := in.src.Events.ListExecutions(ctx, q.after, q.limit)
	if err != nil {
		return executionsPage{}, nil, err
	}
	page := executionsPage{Executions: []Listing{}, Next: listed.Next}
	now := make(map[store.ExecutionInfo]Listing, len(listed.Executions))
	for _, info := range listed.Executions {
		l, ok := known[info]
		if !ok {
			st, err := in.src.StateAt(ctx, info.ExecutionID, -1)
			if err != nil {
				return executionsPage{}, nil, err
			}
			l = ListingOf(info, st)
		}
		now[info] = l
		if q.tenant != "" && l.Tenant != q.tenant {
			continue // a filter of the page: next still pages the store
		}
		page.Executions = append(page.Executions, l)
	}
	return page, now, nil
}

// liveExecutions is /api/executions/live: the page /api/executions answers
// for the same query, as server-sent events, sent again whenever its
// content changes (an execution appears or goes, a log grows, a status
// moves). It re-lists the store every Options.ListPoll, one listing per
// open list. Each frame is "id: <digest>", "event: executions", "data:
// <the page's JSON>", the digest standing for the content: a page
// reconnecting with Last-Event-ID set to the digest of an unchanged page
// gets nothing until a change. A read failure ends the stream with an
// "error" event, and the page reconnects.
func (in *Inspector) liveExecutions(w http.ResponseWriter, r *http.Request) {
	q, ok := in.listQueryOf(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	page, known, err := in.listPage(ctx, q, nil)
	if err != nil {
		in.fail(w, err)
		return
	}
	data, digest, err := pageContent(page)
	if err != nil {
		in.fail(w, err)
		return
	}
	s, ok := in.openStream(w, r)
	if !ok {
		return
	}
	sent := r.Header.Get("Last-Event-ID")
	poll := time.NewTimer(in.opts.ListPoll)
	defer poll.Stop()
	beat := time.NewTicker(Heartbeat)
	defer beat.Stop()
	for {
		if digest != sent {
			frame, err := sseFrame(digest, "executions", data)
			if err != nil {
				in.opts.Logger.Error("inspect: rendering a live list", "error", err)
				s.send(streamErrorFrame)
				return
			}
			if !s.send(frame) {
				return
			}
			sent = digest
		}
		select {
		case <-poll.C:
			if page, known, err = in.listPage(ctx, q, known); err == nil {
				data, digest, err = pageContent(page)
			}
			if err != nil {
				if ctx.Err() == nil {
					in.opts.Logger.Error("inspect: re-listing executions", "error", err)
					s.send(streamErrorFrame)
				}
				return
			}
			poll.Reset(in.opts.ListPoll)
		case <-beat.C:
			if !s.send(": ping\n\n") {
				return
			}
		case <-in.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// pageContent is a page's JSON and its digest: the first 128 bits of its
// SHA-256, in hex.
func pageContent(page executionsPage) ([]byte, string, error) {
	data, err := encodeJSON(page)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:16]), nil
}
