package postgres

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/workerhttp"
	"github.com/loom-kernel/loom/store"
)

// Sizes, limits and bounds of TestMultiNodeQueueKill. None is a
// performance threshold: the deadline only bounds a test that would
// otherwise hang.
const (
	mnqExecutions  = 1000
	mnqVictim      = 2                 // the worker that is SIGKILLed
	mnqConcurrency = 8                 // Limits.Concurrency
	mnqRate        = 6                 // Limits.Rate claims per mnqRateWindow ms: below Concurrency, so
	mnqRateWindow  = 100               // a round with every slot free meets it at once
	mnqKillAfter   = mnqExecutions / 3 // completed executions before the kill…
	mnqKillRunning = 2                 // …while the victim runs at least this many packages, one mid-drive
	mnqClaimTTL    = 3 * time.Second   // the queue's claims, renewed every second
	mnqQueuePoll   = 10 * time.Millisecond
	mnqDeadline    = 120 * time.Second // the whole test
	mnqQueueName   = "starts"
)

// mnqTenants are the tenants of the queued starts: execution i belongs to
// mnqTenants[i%10]; "" is no tenant.
var mnqTenants = [10]string{"acme", "acme", "acme", "acme", "acme", "globex", "globex", "globex", "initech", ""}

// TestMultiNodeQueueKill is the multi-node queue test: three worker OS
// processes (this test binary re-executed, see
// TestMultiNodeQueueWorkerProcess) share one PostgreSQL schema behind a
// dispatch.Pool of workerhttp.RemoteWorkers; this process runs a
// dispatch.Queue over the schema's QueueStore with Concurrency 8, a Rate
// of 200 claims per second and a FairScheduler, and enqueues 1,000 starts
// (900 across three tenants of 500, 300 and 100, 100 without a tenant).
// Each flow enters and leaves a gauge in two steps, sleeps 50 ms on a
// durable timer and completes with the name of the node that completed
// it. Once a third of the executions completed and worker 2 runs at least
// two packages, worker 2 is SIGKILLed: the pool fails its packages over
// to a survivor, whose start package reports the execution once the
// survivors' automatic recovery (after worker 2's 2 s leases expire) has
// re-driven it; timers worker 2 claimed are claimed again at expiry.
//
// Then it checks that:
//   - every execution completed (each log folded), its sequences 0..n-1,
//     its output a worker's name, and the queue holds 1,000 done items;
//   - no limit was ever passed: the gauge's max_n (executions inside
//     their claim's part of the flow at once, under a row lock) and the
//     claims this process held at once are at most Concurrency; no window
//     of RateWindow holds more than Rate claims (every claim, re-claims
//     included: that is what the store bounds); each EXECUTION_STARTED is
//     stamped at or after its item's first claim;
//   - each log holds exactly one TIMER_FIRED, and each timer of an
//     execution worker 2 never touched was claimed exactly once (a second
//     claim would show ClaimDue failing to be exclusive; the ingress gate
//     alone keeps TIMER_FIRED single);
//   - EXECUTION_RECOVERED appears at most once per log, only in
//     executions worker 2 touched, and at least once (the kill was
//     mid-drive);
//   - the light tenant's starts were all claimed before half of the heavy
//     tenant's (fair scheduling; FIFO would interleave them to the end);
//   - metrics: each survivor's scraped loom_executions_completed_total
//     equals the executions whose output names it, and those two plus the
//     ones whose output names worker 2 — whose counters died with it (its
//     scrape just before the kill is at most that) — are 1,000.
func TestMultiNodeQueueKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), mnqDeadline)
	defer cancel()
	began := time.Now()
	schema := newSchema(t)
	st, err := Storage(ctx, testOptions(t, schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	for _, ddl := range mnqDDL(schema) {
		adminExec(t, ddl)
	}
	t.Logf("schema %s", schema)
	token := randomToken(t)
	cluster := startCluster(t, queueWorker, schema, token)
	m := newQueueRun(t, ctx, st, cluster, token)
	m.enqueueAll()
	ran := make(chan error, 1)
	go func() { ran <- m.q.Run(ctx) }()
	m.killWhenDue()
	t.Logf("worker-%d killed %s after the start, at %d completed, %d of its packages in flight",
		mnqVictim, time.Since(began).Round(time.Millisecond), m.completedAtKill, m.inFlightAtKill)
	m.waitAllCompleted()
	if err := m.q.Close(ctx); err != nil {
		t.Errorf("closing the queue: %v", err)
	}
	if err := <-ran; err != nil {
		t.Errorf("queue Run: %v", err)
	}
	t.Logf("all %d executions completed %s after the start", mnqExecutions, time.Since(began).Round(time.Millisecond))
	logs := m.readLogs()
	outputs := m.checkLogs(logs)
	m.checkMetrics(outputs)
	for i, p := range cluster {
		if i != mnqVictim {
			p.stop(t)
		}
	}
	m.checkQueue()
	m.checkLimits(logs)
	m.checkFairness()
	m.checkTimerClaims()
	if t.Failed() {
		t.Logf("schema %s, kill at %d; queue log:\n%s", schema, m.killT, m.qlog.tail(16<<10))
	}
	t.Logf("done in %s", time.Since(began).Round(time.Millisecond))
}

// queueRun is one run of TestMultiNodeQueueKill and what it observed.
type queueRun struct {
	t       *testing.T
	ctx     context.Context
	st      Stores
	cluster []*workerProcess
	placed  *placements
	pool    *dispatch.Pool
	claims  *claimLog
	q       *dispatch.Queue
	qlog    *lockedBuffer
	ids     []string

	killT           int64 // epoch ms after the victim was reaped
	completedAtKill int64
	inFlightAtKill  int
	victimScrape    int64 // the victim's completed counter just before the kill

	mu       sync.Mutex
	settled  int
	released int
}

func newQueueRun(t *testing.T, ctx context.Context, st Stores, cluster []*workerProcess, token string) *queueRun {
	t.Helper()
	transport := &http.Transport{MaxIdleConnsPerHost: 4 * mnqConcurrency}
	t.Cleanup(transport.CloseIdleConnections)
	m := &queueRun{t: t, ctx: ctx, st: st, cluster: cluster, qlog: &lockedBuffer{},
		placed: newPlacements(len(cluster))}
	var workers []dispatch.WorkerRuntime
	for i, p := range cluster {
		w, err := workerhttp.NewRemoteWorker("http://"+p.addr, workerhttp.ClientOptions{
			Token: token, HTTPClient: &http.Client{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, &placedWorker{i: i, w: w, p: m.placed})
	}
	var err error
	if m.pool, err = dispatch.NewPool(dispatch.PoolConfig{Workers: workers}); err != nil {
		t.Fatal(err)
	}
	fair, err := dispatch.NewFairScheduler(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	m.claims = &claimLog{QueueStore: st.Queues}
	m.q, err = dispatch.NewQueue(dispatch.QueueConfig{
		Store: m.claims, Name: mnqQueueName, Dispatcher: m.pool, Owner: "mnq-queue",
		Limits:   store.QueueLimits{Concurrency: mnqConcurrency, Rate: mnqRate, RateWindow: mnqRateWindow},
		ClaimTTL: mnqClaimTTL, Poll: mnqQueuePoll, MaxInFlight: mnqConcurrency, Scheduler: fair,
		Logger: slog.New(slog.NewTextHandler(m.qlog, &slog.HandlerOptions{Level: slog.LevelInfo})),
		OnSettled: func(c store.Claim, res dispatch.ExecutionResult, err error) {
			m.mu.Lock()
			m.settled++
			m.mu.Unlock()
			if err != nil || res.Status != fold.StatusSuspended && res.Status != fold.StatusCompleted {
				t.Errorf("%s settled with %s, %v; want parked or completed", c.Item.ExecutionID, res.Status, err)
			}
		},
		OnReleased: func(c store.Claim, why error) {
			m.mu.Lock()
			m.released++
			m.mu.Unlock()
			fmt.Fprintf(m.qlog, "released %s (attempt %d): %v\n", c.Item.ExecutionID, c.Attempt, why)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// enqueueAll enqueues every start, in id order, before Run claims any, so
// the fair scheduler sees every tenant from the first round.
func (m *queueRun) enqueueAll() {
	for i := range mnqExecutions {
		id := fmt.Sprintf("mnq-%04d", i)
		m.ids = append(m.ids, id)
		_, added, err := m.q.Enqueue(m.ctx, dispatch.EnqueueRequest{ExecutionID: id, FlowID: mnqFlowID, Tenant: mnqTenants[i%10]})
		if err != nil || !added {
			m.t.Fatalf("enqueue %s: added %v, %v", id, added, err)
		}
	}
}

// killWhenDue waits until a third of the executions completed while the
// victim runs at least mnqKillRunning packages, one of them an execution
// whose log shows it running (started, not parked: its drive is on the
// victim), and SIGKILLs the victim at once. The victim's metrics are
// scraped on every look, so the last scrape is the one just before the
// kill.
func (m *queueRun) killWhenDue() {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	victim := m.cluster[mnqVictim]
	for {
		n, err := scrapeCompleted(m.ctx, victim.addr)
		if err != nil {
			m.t.Fatalf("scraping %s: %v", victim.name, err)
		}
		m.victimScrape = n
		if done := m.completed(); done >= mnqKillAfter && m.victimDriving() {
			m.completedAtKill = done
			break
		}
		select {
		case <-tick.C:
		case <-m.ctx.Done():
			m.t.Fatalf("never killed: %d completed, worker-%d running %d packages", m.completed(), mnqVictim, m.placed.inFlight(mnqVictim))
		}
	}
	m.inFlightAtKill = m.placed.inFlight(mnqVictim)
	m.killT = victim.kill(m.t)
}

// victimDriving reports whether the victim runs mnqKillRunning packages, one
// of an execution that is running.
func (m *queueRun) victimDriving() bool {
	ids := m.placed.running(mnqVictim)
	if len(ids) < mnqKillRunning {
		return false
	}
	for _, id := range ids {
		evs, err := store.Read(m.ctx, m.st.Events, id)
		if err != nil {
			m.t.Fatalf("reading %s: %v", id, err)
		}
		if len(evs) > 0 && fold.Fold(evs).Status == fold.StatusRunning {
			return true
		}
	}
	return false
}

// waitAllCompleted polls the log until every execution has completed; at
// the deadline it fails with the logs of those that have not.
func (m *queueRun) waitAllCompleted() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for m.completed() < mnqExecutions {
		select {
		case <-tick.C:
			continue
		case <-m.ctx.Done():
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := m.st.Queues.Depth(ctx, mnqQueueName, time.Now().UnixMilli())
		m.t.Errorf("not every execution completed before the deadline; queue depth %+v (%v)", d, err)
		for _, id := range m.ids {
			evs, err := store.Read(ctx, m.st.Events, id)
			if err != nil {
				m.t.Fatalf("reading %s: %v", id, err)
			}
			if s := fold.Fold(evs); s.Status != fold.StatusCompleted {
				m.t.Errorf("%s is %s (sent to %v); timer %s; claims %s:\n%s", id, s.Status, m.placed.sentOf(id),
					m.dumpRows(ctx, `SELECT key, wake_at, claim_owner, claim_expires_at FROM `+quoted(m.st.DB.Schema())+`.timers WHERE execution_id = $1`, id),
					m.dumpRows(ctx, `SELECT key, wake_at, worker, claimed_at FROM `+quoted(m.st.DB.Schema())+`.mnq_timer_claims WHERE execution_id = $1`, id),
					timeline(evs))
			}
		}
		m.t.FailNow()
	}
}

// dumpRows renders the rows of a diagnostic query.
func (m *queueRun) dumpRows(ctx context.Context, sql string, args ...any) string {
	rows, err := m.st.DB.Pool().Query(ctx, sql, args...)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%v ", vals)
	}
	if err := rows.Err(); err != nil {
		return err.Error()
	}
	return "[" + b.String() + "]"
}

// completed counts the log's EXECUTION_COMPLETED events.
func (m *queueRun) completed() int64 {
	var n int64
	err := m.st.DB.Pool().QueryRow(m.ctx, `SELECT count(*) FROM `+quoted(m.st.DB.Schema())+`.events WHERE event_type = $1`,
		event.ExecutionCompleted).Scan(&n)
	if err != nil {
		m.t.Fatalf("counting completed executions: %v", err)
	}
	return n
}

// readLogs reads every execution's log.
func (m *queueRun) readLogs() map[string][]event.Envelope {
	logs := make(map[string][]event.Envelope, len(m.ids))
	for _, id := range m.ids {
		evs, err := store.Read(m.ctx, m.st.Events, id)
		if err != nil {
			m.t.Fatalf("reading %s: %v", id, err)
		}
		logs[id] = evs
	}
	return logs
}

// checkLogs requires every log to be completed, contiguous, with one
// TIMER_FIRED and at most one EXECUTION_RECOVERED (only in an execution
// the victim touched, and in at least one), and returns how many
// executions each worker completed (by output).
func (m *queueRun) checkLogs(logs map[string][]event.Envelope) map[string]int64 {
	t := m.t
	victimTimers := m.timerClaimsBy("worker-" + strconv.Itoa(mnqVictim))
	outputs := map[string]int64{}
	recovered := 0
	for _, id := range m.ids {
		evs := logs[id]
		for i, e := range evs {
			if e.Sequence != int64(i) {
				t.Errorf("%s: event %d has sequence %d: a gap or a duplicate", id, i, e.Sequence)
				break
			}
		}
		s := fold.Fold(evs)
		var out string
		if s.Status != fold.StatusCompleted || json.Unmarshal(s.Variables.Output, &out) != nil || !strings.HasPrefix(out, "worker-") {
			t.Errorf("%s: status %s, output %s; want completed with a worker's name:\n%s", id, s.Status, s.Variables.Output, timeline(evs))
			continue
		}
		outputs[out]++
		if n := countType(evs, event.TimerFired); n != 1 {
			t.Errorf("%s: %d TIMER_FIRED, want exactly 1:\n%s", id, n, timeline(evs))
		}
		touched := m.placed.sentTo(id, mnqVictim) || victimTimers[id]
		switch n := countType(evs, event.ExecutionRecovered); {
		case n > 1:
			t.Errorf("%s: %d EXECUTION_RECOVERED, want at most 1", id, n)
		case n == 1 && !touched:
			t.Errorf("%s was recovered though worker-%d never touched it:\n%s", id, mnqVictim, timeline(evs))
		case n == 1:
			recovered++
		}
	}
	if recovered == 0 {
		t.Errorf("no execution was recovered: worker-%d drove none when it was killed", mnqVictim)
	}
	t.Logf("%d executions recovered; completed by node: %v", recovered, outputs)
	return outputs
}

// checkMetrics scrapes each survivor until its completed counter equals
// the executions whose output names it (the counters come from the
// durable-event hook, which runs a little behind the log), and requires
// the survivors' counters plus the victim's completions, counted from the
// log, to be every execution.
func (m *queueRun) checkMetrics(outputs map[string]int64) {
	t := m.t
	victim := "worker-" + strconv.Itoa(mnqVictim)
	sum := outputs[victim]
	if m.victimScrape > outputs[victim] {
		t.Errorf("%s's last scrape counted %d completions; the log holds only %d by it", victim, m.victimScrape, outputs[victim])
	}
	for i, p := range m.cluster {
		if i == mnqVictim {
			continue
		}
		want := outputs[p.name]
		got, err := m.scrapeUntil(p.addr, want)
		if err != nil || got != want {
			t.Errorf("%s: scraped loom_executions_completed_total %d (%v), want %d, the executions it completed", p.name, got, err, want)
		}
		sum += got
	}
	if sum != mnqExecutions {
		t.Errorf("the survivors' completed counters plus %s's %d completions in the log add up to %d, want %d",
			victim, outputs[victim], sum, mnqExecutions)
	}
	t.Logf("metrics: survivors' completed counters plus %d completions by %s (its last scrape: %d) = %d",
		outputs[victim], victim, m.victimScrape, sum)
}

// scrapeUntil scrapes addr until its completed counter reaches want or the
// test's deadline, and returns the last count.
func (m *queueRun) scrapeUntil(addr string, want int64) (int64, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := scrapeCompleted(m.ctx, addr)
		if err == nil && got >= want {
			return got, nil
		}
		select {
		case <-tick.C:
		case <-m.ctx.Done():
			return got, fmt.Errorf("deadline: %v", err)
		}
	}
}

// scrapeCompleted fetches the Prometheus text at addr and sums every
// series of loom_executions_completed_total: none (nothing completed on
// the node yet, so the counter was never created) is 0.
func scrapeCompleted(ctx context.Context, addr string) (int64, error) {
	const name = "loom_executions_completed_total"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+mnqMetricsPath, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", mnqMetricsPath, resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(line) // name{labels} value: the exporter writes no timestamps
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %v", line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return int64(sum), nil
}

// checkQueue requires every item done and nothing claimed or ready.
func (m *queueRun) checkQueue() {
	d, err := m.q.Depth(m.ctx)
	if err != nil {
		m.t.Fatal(err)
	}
	if d != (store.QueueDepth{Done: mnqExecutions}) {
		m.t.Errorf("queue depth %+v, want %d done and nothing else", d, mnqExecutions)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.settled < mnqExecutions {
		m.t.Errorf("%d claims settled, want at least %d", m.settled, mnqExecutions)
	}
	m.t.Logf("queue: %d claims, %d settled, %d released", len(m.claims.all()), m.settled, m.released)
}

// checkLimits requires Concurrency to hold in the gauge and in the claims
// this process held, Rate in every window of the claim times, and every
// start to come after its first claim.
func (m *queueRun) checkLimits(logs map[string][]event.Envelope) {
	t := m.t
	var n, maxN, inside int64
	err := m.st.DB.Pool().QueryRow(m.ctx, `SELECT n, max_n, (SELECT count(*) FROM `+quoted(m.st.DB.Schema())+`.mnq_inside)
		FROM `+quoted(m.st.DB.Schema())+`.mnq_gauge WHERE id = 1`).Scan(&n, &maxN, &inside)
	if err != nil {
		t.Fatal(err)
	}
	entries := adminQueryInt(t, `SELECT count(*) FROM `+quoted(m.st.DB.Schema())+`.mnq_entries`)
	switch {
	case maxN > mnqConcurrency:
		t.Errorf("the gauge reached %d executions inside at once, over Concurrency %d", maxN, mnqConcurrency)
	case maxN < 1 || n != 0 || inside != 0:
		t.Errorf("gauge n %d, max_n %d, %d inside at the end; want 0, at least 1, 0", n, maxN, inside)
	}
	claims := m.claims.all()
	if held := m.claims.maxHeld(); held > mnqConcurrency {
		t.Errorf("this process held %d claims at once, over Concurrency %d", held, mnqConcurrency)
	}
	times := make([]int64, len(claims))
	first := map[string]int64{}
	for i, c := range claims {
		times[i] = c.at
		if _, ok := first[c.id]; !ok {
			first[c.id] = c.at
		}
	}
	slices.Sort(times)
	busiest := 0
	for lo, hi := 0, 0; hi < len(times); hi++ {
		for times[lo] <= times[hi]-mnqRateWindow {
			lo++
		}
		busiest = max(busiest, hi-lo+1)
	}
	if busiest > mnqRate {
		t.Errorf("a window of %d ms holds %d claims, over Rate %d", mnqRateWindow, busiest, mnqRate)
	}
	for _, id := range m.ids {
		if at, ok := first[id]; !ok {
			t.Errorf("%s was never claimed", id)
		} else if evs := logs[id]; len(evs) > 0 && evs[0].Timestamp < at {
			t.Errorf("%s started at %d, before its first claim at %d", id, evs[0].Timestamp, at)
		}
	}
	t.Logf("limits: gauge max %d (Concurrency %d), %d enter runs for %d executions, held at most %d claims; "+
		"%d claims, at most %d in a %d ms window (Rate %d)",
		maxN, mnqConcurrency, entries, mnqExecutions, m.claims.maxHeld(), len(claims), busiest, mnqRateWindow, mnqRate)
}

// checkFairness requires the light tenant's starts to be claimed, all of
// them, before half of the heavy tenant's: under the FairScheduler each
// ready tenant claims in turn; in FIFO order the light tenant's items,
// enqueued among the others', would run to the end.
func (m *queueRun) checkFairness() {
	order := map[string][]int{} // tenant → first-claim indexes
	seen := map[string]bool{}
	for _, c := range m.claims.all() {
		if !seen[c.id] {
			seen[c.id] = true
			order[c.tenant] = append(order[c.tenant], len(seen)-1)
		}
	}
	light, heavy := order["initech"], order["acme"]
	if len(light) == 0 || len(heavy) == 0 {
		m.t.Errorf("first claims by tenant: %d initech, %d acme", len(light), len(heavy))
		return
	}
	if last, median := light[len(light)-1], heavy[len(heavy)/2]; last >= median {
		m.t.Errorf("the light tenant's last start was claimed %d-th, after the heavy tenant's median %d-th", last, median)
	} else {
		m.t.Logf("fairness: initech's last start claimed %d-th, acme's median %d-th", last, median)
	}
}

// checkTimerClaims requires the timer claims to have been exclusive: of an
// execution the victim never touched, each claim of a timer came at or
// after the previous claim's expiry (one claim, unless a firing failed and
// left the timer to its claim's expiry). The victim's executions are
// exempt: a survivor re-driving one re-arms its park timer, which clears a
// claim by design (Put).
func (m *queueRun) checkTimerClaims() {
	victim := "worker-" + strconv.Itoa(mnqVictim)
	rows, err := m.st.DB.Pool().Query(m.ctx, `SELECT execution_id, key, wake_at, worker, claimed_at, ttl
		FROM `+quoted(m.st.DB.Schema())+`.mnq_timer_claims ORDER BY execution_id, key, wake_at, claimed_at`)
	if err != nil {
		m.t.Fatal(err)
	}
	type timerClaim struct {
		id, key, worker string
		wake, at, ttl   int64
	}
	var c, prev timerClaim
	claimed := map[string]bool{}
	victimTimers := m.timerClaimsBy(victim)
	reclaimed := 0
	_, err = pgx.ForEachRow(rows, []any{&c.id, &c.key, &c.wake, &c.worker, &c.at, &c.ttl}, func() error {
		claimed[c.id] = true
		same := prev.id == c.id && prev.key == c.key && prev.wake == c.wake
		touched := victimTimers[c.id] || m.placed.sentTo(c.id, mnqVictim)
		switch {
		case !same:
		case c.at < prev.at+prev.ttl && !touched:
			m.t.Errorf("timer %s (wake %d) was claimed by %s at %d while %s's claim at %d lived until %d",
				c.key, c.wake, c.worker, c.at, prev.worker, prev.at, prev.at+prev.ttl)
		default:
			reclaimed++
		}
		prev = c
		return nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
	for _, id := range m.ids {
		if !claimed[id] {
			m.t.Errorf("%s: no claim of its timer was recorded", id)
		}
	}
	m.t.Logf("timers: %d claimed again (after a claim's expiry, or re-armed after %s's death)", reclaimed, victim)
}

// timerClaimsBy returns the executions whose timer worker claimed.
func (m *queueRun) timerClaimsBy(worker string) map[string]bool {
	rows, err := m.st.DB.Pool().Query(m.ctx, `SELECT DISTINCT execution_id FROM `+quoted(m.st.DB.Schema())+
		`.mnq_timer_claims WHERE worker = $1`, worker)
	if err != nil {
		m.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		m.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// placements records where the pool sent each package: every worker each
// execution's packages went to, and how many run on each worker now.
type placements struct {
	mu       sync.Mutex
	inflight []map[string]int // worker → execution id → its packages there now
	sent     map[string][]int
}

func newPlacements(workers int) *placements {
	p := &placements{sent: map[string][]int{}}
	for range workers {
		p.inflight = append(p.inflight, map[string]int{})
	}
	return p
}

func (p *placements) begin(i int, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight[i][id]++
	p.sent[id] = append(p.sent[id], i)
}

func (p *placements) end(i int, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight[i][id]--; p.inflight[i][id] == 0 {
		delete(p.inflight[i], id)
	}
}

func (p *placements) inFlight(i int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inflight[i])
}

// running lists the executions with a package on worker i now, sorted.
func (p *placements) running(i int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.inflight[i]))
	for id := range p.inflight[i] { //loom:sorted sorted below
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// sentTo reports whether a package of id went to worker i.
func (p *placements) sentTo(id string, i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.sent[id], i)
}

func (p *placements) sentOf(id string) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sent[id])
}

// placedWorker is worker i of the pool, recording its packages.
type placedWorker struct {
	i int
	w dispatch.WorkerRuntime
	p *placements
}

// Execute implements dispatch.WorkerRuntime.
func (w *placedWorker) Execute(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	w.p.begin(w.i, pkg.ExecutionID)
	defer w.p.end(w.i, pkg.ExecutionID)
	return w.w.Execute(ctx, pkg)
}

// claimLog is the queue's store, recording every claim it hands out and
// counting the claims held from Claim's return to the Complete or Release
// that ends them: an undercount of what the store holds live.
type claimLog struct {
	store.QueueStore

	mu         sync.Mutex
	claims     []claimRecord
	held, most int
}

// claimRecord is one claim: the item's execution and tenant, and its time.
type claimRecord struct {
	id, tenant string
	at         int64
}

// Claim implements store.QueueStore.
func (l *claimLog) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	cs, err := l.QueueStore.Claim(ctx, req)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		l.claims = append(l.claims, claimRecord{id: c.Item.ExecutionID, tenant: c.Item.Tenant, at: c.ClaimedAt})
	}
	l.held += len(cs)
	l.most = max(l.most, l.held)
	return cs, err
}

// Complete implements store.QueueStore.
func (l *claimLog) Complete(ctx context.Context, c store.Claim) error {
	l.drop()
	return l.QueueStore.Complete(ctx, c)
}

// Release implements store.QueueStore.
func (l *claimLog) Release(ctx context.Context, c store.Claim) error {
	l.drop()
	return l.QueueStore.Release(ctx, c)
}

func (l *claimLog) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held--
}

func (l *claimLog) all() []claimRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.claims)
}

func (l *claimLog) maxHeld() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.most
}
