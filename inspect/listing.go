package inspect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/loom-kernel/loom"

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
// events in its log) and its folded status, sequence, startedAt and
// updatedAt, the gate it is parked on, and its fork lineage as the state's
// _forkChain holds it (forkChain). Every tool names them so.
type Listing struct {
	store.ExecutionInfo
	Status      fold.Status     `json:"status"`
	Sequence    int64           `json:"sequence"`
	StartedAt   int64           `json:"startedAt,omitempty"`
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
	l := Listing{ExecutionInfo: info, Status: st.Status, Sequence: st.Sequence, StartedAt: st.StartedAt, UpdatedAt: st.UpdatedAt,
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
	in.mux.HandleFunc("GET /api/executions/counts", in.executionCounts)
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
// after a cursor, of the executions whose id starts with prefix (q), of a
// flow, a tenant and a status, each "" for any.
type listQuery struct {
	after, prefix, flow, tenant string
	status                      fold.Status
	limit                       int
	// counts asks for the counts by status with the page: a count costs a
	// pass over the index of what the prefix, flow and tenant select, so
	// /api/executions answers them only with ?counts=1, and the live list
	// with every frame.
	counts bool
}

// The orders of a list (executionsPage.Order).
const (
	// OrderRecent: newest start first, from the store's
	// store.ExecutionCatalog; the filters select in the store, and the
	// page carries the counts by status.
	OrderRecent = "recent"
	// OrderID: the store's listing, in id order, for a store without a
	// catalog; the filters select within each page of the listing, so a
	// page may hold fewer executions than its limit, and there are no
	// counts.
	OrderID = "id"
)

func (in *Inspector) listQueryOf(w http.ResponseWriter, r *http.Request) (listQuery, bool) {
	limit, ok := in.intParam(w, r, "limit", DefaultExecutionsPage, MaxExecutionsPage)
	if !ok {
		return listQuery{}, false
	}
	v := r.URL.Query()
	q := listQuery{after: v.Get("after"), prefix: v.Get("q"), flow: v.Get("flow"), tenant: v.Get("tenant"),
		status: fold.Status(v.Get("status")), limit: limit, counts: v.Get("counts") == "1"}
	if q.status != "" && !store.CatalogStatus(q.status).Valid() {
		in.writeError(w, http.StatusBadRequest, "status must be one of "+statusNames()+", or absent for any")
		return listQuery{}, false
	}
	return q, true
}

func statusNames() string {
	names := make([]string, len(store.CatalogStatuses))
	for i, s := range store.CatalogStatuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// catalog is the store's catalog, when it keeps one.
func (in *Inspector) catalog() (store.ExecutionCatalog, bool) {
	c, ok := in.src.Events.(store.ExecutionCatalog)
	return c, ok
}

// executionsPage is the body of /api/executions and the data of a live
// list's frames. Counts, in OrderRecent only, counts the executions the
// query's prefix, flow and tenant select, by status (its status aside).
type executionsPage struct {
	Executions []Listing           `json:"executions"`
	Next       string              `json:"next,omitempty"`
	Order      string              `json:"order"`
	Counts     store.CatalogCounts `json:"counts,omitempty"`
}

// known holds the listings and states of an earlier call of listPage, by
// execution id: a log only grows, so an execution whose log is as long as
// it was has the same folded state and is not folded again. (An execution
// deleted and re-created with the same length between two calls keeps
// its old listing until its log grows, unless the catalog shows its new
// start.)
type known map[string]knownListing

type knownListing struct {
	info  store.ExecutionInfo
	state fold.State
}

// listPage lists one page of executions with their folded status, from
// the store's catalog when it keeps one (OrderRecent), else from its
// listing (OrderID). It returns the page and what to pass as known next
// time: this page's only, so it never outgrows a page.
func (in *Inspector) listPage(ctx context.Context, q listQuery, seen known) (executionsPage, known, error) {
	if c, ok := in.catalog(); ok {
		page, now, err := in.catalogPage(ctx, c, q, seen)
		if !errors.Is(err, store.ErrNoCatalog) {
			return page, now, err
		}
		// A store without the catalog it could keep (a read-only view of
		// an older file): its listing.
	}
	listed, err := in.src.Events.ListExecutions(ctx, q.after, q.limit)
	if err != nil {
		return executionsPage{}, nil, err
	}
	page := executionsPage{Executions: []Listing{}, Next: listed.Next, Order: OrderID}
	now := make(known, len(listed.Executions))
	for _, info := range listed.Executions {
		k, ok := seen[info.ExecutionID]
		if !ok || k.info != info {
			st, err := in.src.StateAt(ctx, info.ExecutionID, -1)
			if err != nil {
				return executionsPage{}, nil, err
			}
			k = knownListing{info: info, state: st}
		}
		now[info.ExecutionID] = k
		if l := ListingOf(info, k.state); q.selects(l) {
			page.Executions = append(page.Executions, l) // a filter of the page: next still pages the store
		}
	}
	return page, now, nil
}

// selects says l is one q asks for.
func (q listQuery) selects(l Listing) bool {
	return strings.HasPrefix(l.ExecutionID, q.prefix) && (q.flow == "" || l.WorkflowID == q.flow) &&
		(q.tenant == "" || l.Tenant == q.tenant) && (q.status == "" || l.Status == q.status)
}

// catalogPage is listPage over a catalog: the page the catalog selects,
// each entry folded (or, when known, brought up to date with the events
// appended since), and the counts. An entry whose folded status is not
// the one asked for (the catalog is an index: see store.CatalogStatusOf)
// is left out.
func (in *Inspector) catalogPage(ctx context.Context, c store.ExecutionCatalog, q listQuery, seen known) (executionsPage, known, error) {
	cq := store.CatalogQuery{Prefix: q.prefix, WorkflowID: q.flow, Tenant: q.tenant, Status: store.CatalogStatus(q.status),
		After: q.after, Limit: q.limit}
	found, err := c.SearchExecutions(ctx, cq)
	if err != nil {
		return executionsPage{}, nil, err
	}
	page := executionsPage{Executions: []Listing{}, Next: found.Next, Order: OrderRecent}
	if q.counts {
		if page.Counts, err = c.CountExecutions(ctx, cq); err != nil {
			return executionsPage{}, nil, err
		}
	}
	now := make(known, len(found.Entries))
	for _, e := range found.Entries {
		k, ok := seen[e.ExecutionID]
		if ok && k.state.StartedAt == e.StartedAt {
			tail, err := in.src.Events.ReadFrom(ctx, e.ExecutionID, k.state.Sequence+1)
			if err != nil {
				return executionsPage{}, nil, err
			}
			if len(tail) > 0 {
				if k.state, err = fold.FoldChecked(k.state, tail); err != nil {
					return executionsPage{}, nil, err
				}
			}
		} else {
			st, err := in.src.StateAt(ctx, e.ExecutionID, -1)
			if errors.Is(err, loom.ErrExecutionNotFound) {
				continue // deleted since the search
			}
			if err != nil {
				return executionsPage{}, nil, err
			}
			k.state = st
		}
		k.info = store.ExecutionInfo{ExecutionID: e.ExecutionID, WorkflowID: e.WorkflowID, Length: k.state.Sequence + 1}
		now[e.ExecutionID] = k
		if l := ListingOf(k.info, k.state); q.selects(l) {
			page.Executions = append(page.Executions, l)
		}
	}
	return page, now, nil
}

// executionCounts is /api/executions/counts: the counts by status of the
// executions the query's prefix, flow and tenant select, {counts, order}
// (no counts in OrderID: the store keeps no catalog to count).
func (in *Inspector) executionCounts(w http.ResponseWriter, r *http.Request) {
	q, ok := in.listQueryOf(w, r)
	if !ok {
		return
	}
	out := struct {
		Counts store.CatalogCounts `json:"counts,omitempty"`
		Order  string              `json:"order"`
	}{Order: OrderID}
	if c, ok := in.catalog(); ok {
		counts, err := c.CountExecutions(r.Context(), store.CatalogQuery{Prefix: q.prefix, WorkflowID: q.flow, Tenant: q.tenant})
		switch {
		case err == nil:
			out.Counts, out.Order = counts, OrderRecent
		case !errors.Is(err, store.ErrNoCatalog):
			in.fail(w, err)
			return
		}
	}
	in.writeJSON(w, out)
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
	q.counts = true
	ctx := r.Context()
	page, seen, err := in.listPage(ctx, q, nil)
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
			if page, seen, err = in.listPage(ctx, q, seen); err == nil {
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
