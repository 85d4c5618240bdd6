package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/store"
)

// Workload h: the web inspector's execution list at scale. Two
// populations, small and large (-inspect-small, -inspect-large), are built
// through the real runtime over the plugin's Storage preset, as workload f
// builds its own: inspectFlow runs one trivial step, then execution i parks
// (i%3 == 0), completes (1) or fails (2). Once both are built and closed,
// each is measured over the reopened storage by an inspect.Inspector
// served on loopback HTTP, as `loom inspect` serves it, one GET at a time
// (a warm-up, then inspectReps requests; the median is reported):
//
//	first      /api/executions: the first page (50), newest first
//	next       the page after it, through its cursor
//	suspended  ?status=suspended: the first page of the parked ones
//	prefix     ?q=h-0000000: the executions whose id starts so (10 of them)
//	counts     /api/executions/counts: the counts by status of them all,
//	           which the live list sends with each frame (a pass over the
//	           status index: linear by nature, reported, no target)
//
// and, beside them, the store's own listing of 50 (ListExecutions) as the
// raw baseline. Every answer is checked: the page's size, its order
// (recent: the store keeps a catalog), and counts adding up to the
// population. ratio = first at the large size over first at the small
// one; target <= 2.

// Parameters of workload h.
const (
	defaultInspectSmall = 100
	defaultInspectLarge = 100_000
	maxInspectLarge     = 1_000_000
	inspectFlowID       = "bench-inspect"
	inspectGate         = "h-gate"
	// inspectReps is the measured requests of each query at each size;
	// inspectWarmups are sent first, unmeasured.
	inspectReps    = 25
	inspectWarmups = 5
	inspectTarget  = 2.0
	inspectPrefix  = "h-0000000"
)

// inspectDescription is workload h's description in the report.
const inspectDescription = "The inspector's execution list over a small and a large population built through the runtime " +
	"(one trivial step, then a third park, a third complete, a third fail), each measured over the reopened storage by an " +
	"inspect.Inspector on loopback HTTP: GET /api/executions first page (50, newest first, counts by status), the next page, " +
	"?status=suspended and ?q=<prefix of 10>, medians of the requests; raw = the store's ListExecutions of 50; " +
	"and /api/executions/counts (all statuses) beside them. ratio = first page large/small, target <= 2"

// inspectID names the i-th execution of a population: zero-padded, so an
// id prefix selects a known set.
func inspectID(i int) string { return fmt.Sprintf("h-%08d", i) }

// errInspectFailed is the failure of every third execution of workload h.
var errInspectFailed = errors.New("bench: this execution fails on purpose")

// inspectFlow runs trivialStep, then parks, completes or fails by its
// input modulo 3.
func inspectFlow() *loom.Flow {
	return loom.NewFlow(inspectFlowID, func(ctx *loom.Context, n int) (int, error) {
		n, err := loom.Run(ctx, trivialStep, n)
		if err != nil {
			return 0, err
		}
		switch (n - 1) % 3 {
		case 0:
			return loom.Suspend[int](ctx, inspectGate)
		case 1:
			return n, nil
		}
		return 0, errInspectFailed
	})
}

// InspectListReport is workload h's report.
type InspectListReport struct {
	Description string          `json:"description"`
	Requests    int             `json:"requests"`
	Small       InspectListSize `json:"small"`
	Large       InspectListSize `json:"large"`
	// Ratio is the first page's median at the large size over the small.
	Ratio      float64 `json:"ratio"`
	Target     float64 `json:"target"`
	Comparison string  `json:"comparison"`
	Met        bool    `json:"met"`
}

// InspectListSize is one population: its build, and the median of each
// query, in milliseconds, with the store's own listing beside them.
type InspectListSize struct {
	Executions  int     `json:"executions"`
	BuildSec    float64 `json:"buildSec"`
	Order       string  `json:"order"`
	FirstMs     float64 `json:"firstMs"`
	NextMs      float64 `json:"nextMs"`
	SuspendedMs float64 `json:"suspendedMs"`
	PrefixMs    float64 `json:"prefixMs"`
	// CountsMs is /api/executions/counts over the whole population.
	CountsMs  float64 `json:"countsMs"`
	RawListMs float64 `json:"rawListMs"`
	// FirstOverRaw is FirstMs over RawListMs: what the inspector adds to
	// the store's listing (folding each row, the counts, HTTP and JSON).
	FirstOverRaw float64 `json:"firstOverRaw"`
}

// measureInspectList runs workload h over st.
func measureInspectList(ctx context.Context, st scaleStorage, small, large int, progress func(string, ...any)) (*InspectListReport, error) {
	rep := &InspectListReport{Description: inspectDescription, Requests: inspectReps, Target: inspectTarget, Comparison: atMost}
	sizes := []struct {
		n   int
		out *InspectListSize
	}{{small, &rep.Small}, {large, &rep.Large}}
	for _, sz := range sizes {
		if err := buildInspectPopulation(ctx, st, sz.n, sz.out, progress); err != nil {
			return nil, err
		}
	}
	for _, sz := range sizes {
		if err := measureInspectPopulation(ctx, st, sz.n, sz.out, progress); err != nil {
			return nil, err
		}
	}
	rep.Ratio = round(rep.Large.FirstMs / rep.Small.FirstMs)
	rep.Met = rep.Ratio <= inspectTarget
	progress("workload h: first page %.2f ms at %d, %.2f ms at %d: ratio %.2f (target <= %.0f)",
		rep.Small.FirstMs, small, rep.Large.FirstMs, large, rep.Ratio, inspectTarget)
	return rep, nil
}

// buildInspectPopulation starts the n executions of a population, each
// waited for until it settles, and closes runtime and storage.
func buildInspectPopulation(ctx context.Context, st scaleStorage, n int, out *InspectListSize, progress func(string, ...any)) (err error) {
	ctx, cancel := context.WithTimeout(ctx, scaleBuildTimeout)
	defer cancel()
	s, err := st.open(ctx, n)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	warnings := &warningLog{}
	rt, err := loom.New(loom.Config{Storage: s.preset, Flows: []*loom.Flow{inspectFlow()}, StickyParks: scaleStickyParks,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(warnings)})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()
	start := time.Now()
	one := func(ctx context.Context, rt *loom.Runtime, i int) error {
		id, err := rt.Start(ctx, inspectFlowID, i, loom.WithExecutionID(inspectID(i)))
		if err != nil {
			return err
		}
		_, err = rt.WaitForSettled(ctx, id)
		return err
	}
	if err := startAll(ctx, rt, n, start, "workload h", "settled", one, progress); err != nil {
		return err
	}
	out.Executions, out.BuildSec = n, round(time.Since(start).Seconds())
	progress("workload h: %d executions built in %.1f s", n, out.BuildSec)
	return warningsErr(warnings)
}

// measureInspectPopulation serves the inspector over the reopened
// population of n and times each query.
func measureInspectPopulation(ctx context.Context, st scaleStorage, n int, out *InspectListSize, progress func(string, ...any)) (err error) {
	s, err := st.open(ctx, n)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	in, err := inspect.New(inspect.Source{Events: s.events}, inspect.Options{})
	if err != nil {
		return err
	}
	defer in.Close()
	srv := httptest.NewServer(in)
	defer srv.Close()
	client := srv.Client()

	first, err := getInspectPage(ctx, client, srv.URL+"/api/executions", url.Values{})
	if err != nil {
		return err
	}
	if err := checkInspectPage(first, 0, min(n, inspect.DefaultExecutionsPage)); err != nil {
		return fmt.Errorf("workload h: the first page at %d: %w", n, err)
	}
	out.Order = first.Order
	// want is each query's page size, total what its counts add up to
	// (the counts ignore the status filter, not the prefix).
	// (want -1: a counts answer, no page).
	queries := []struct {
		name        string
		path        string
		q           url.Values
		want, total int
		into        *float64
	}{
		{"first", "/api/executions", url.Values{}, min(n, inspect.DefaultExecutionsPage), 0, &out.FirstMs},
		{"next", "/api/executions", url.Values{"after": {first.Next}}, min(n-inspect.DefaultExecutionsPage, inspect.DefaultExecutionsPage), 0, &out.NextMs},
		{"suspended", "/api/executions", url.Values{"status": {"suspended"}}, min((n+2)/3, inspect.DefaultExecutionsPage), 0, &out.SuspendedMs},
		{"prefix", "/api/executions", url.Values{"q": {inspectPrefix}}, min(n, 10), 0, &out.PrefixMs},
		{"counts", "/api/executions/counts", url.Values{}, -1, n, &out.CountsMs},
	}
	for _, qu := range queries {
		if qu.name == "next" && first.Next == "" {
			continue
		}
		samples := make([]time.Duration, 0, inspectReps)
		for i := range inspectWarmups + inspectReps {
			t0 := time.Now()
			page, err := getInspectPage(ctx, client, srv.URL+qu.path, qu.q)
			d := time.Since(t0)
			if err != nil {
				return err
			}
			if err := checkInspectPage(page, qu.total, qu.want); err != nil {
				return fmt.Errorf("workload h: %s at %d: %w", qu.name, n, err)
			}
			if i >= inspectWarmups {
				samples = append(samples, d)
			}
		}
		*qu.into = millis(median(samples))
	}
	raw := make([]time.Duration, 0, inspectReps)
	for i := range inspectWarmups + inspectReps {
		t0 := time.Now()
		page, err := s.events.ListExecutions(ctx, "", inspect.DefaultExecutionsPage)
		d := time.Since(t0)
		if err != nil {
			return err
		}
		if len(page.Executions) != min(n, inspect.DefaultExecutionsPage) {
			return fmt.Errorf("workload h: the store listed %d of %d", len(page.Executions), n)
		}
		if i >= inspectWarmups {
			raw = append(raw, d)
		}
	}
	out.RawListMs = millis(median(raw))
	out.FirstOverRaw = round(out.FirstMs / out.RawListMs)
	progress("workload h: at %d: first %.2f ms, next %.2f, suspended %.2f, prefix %.2f, counts %.2f; the store's listing %.2f ms",
		n, out.FirstMs, out.NextMs, out.SuspendedMs, out.PrefixMs, out.CountsMs, out.RawListMs)
	return nil
}

// inspectPage is the part of /api/executions workload h checks.
type inspectPage struct {
	Executions []json.RawMessage `json:"executions"`
	Next       string            `json:"next"`
	Order      string            `json:"order"`
	Counts     map[string]int64  `json:"counts"`
}

func getInspectPage(ctx context.Context, client *http.Client, base string, q url.Values) (inspectPage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"?"+q.Encode(), nil)
	if err != nil {
		return inspectPage{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return inspectPage{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return inspectPage{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return inspectPage{}, fmt.Errorf("workload h: GET %s?%s: %d %s", base, q.Encode(), resp.StatusCode, body)
	}
	var p inspectPage
	return p, json.Unmarshal(body, &p)
}

// checkInspectPage checks an answer: want executions (-1: a counts
// answer, none), newest first from the catalog; with counts (total > 0),
// adding up to total.
func checkInspectPage(p inspectPage, total, want int) error {
	if p.Order != inspect.OrderRecent {
		return fmt.Errorf("the list's order is %q, not %q: the store keeps no %T", p.Order, inspect.OrderRecent, (*store.ExecutionCatalog)(nil))
	}
	if want >= 0 && len(p.Executions) != want {
		return fmt.Errorf("%d executions on the page, want %d", len(p.Executions), want)
	}
	if total == 0 {
		if p.Counts != nil {
			return fmt.Errorf("counts %v on a page that did not ask for them", p.Counts)
		}
		return nil
	}
	var sum int64
	for _, c := range p.Counts { //loom:order-independent a sum
		sum += c
	}
	if sum != int64(total) {
		return fmt.Errorf("the counts %v add up to %d, want %d", p.Counts, sum, total)
	}
	return nil
}
