package postgres

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/workerhttp"
	"github.com/loom-kernel/loom/store"
)

// Sizes and bounds of TestMultiNodeKill. None is a performance threshold:
// the deadline only bounds a test that would otherwise hang.
const (
	mnWorkers        = 3
	mnExecutions     = 300
	mnKilled         = 2                // the worker that is SIGKILLed
	mnStartsInFlight = 45               // start packages in flight at once, so executions overlap
	mnKillAfter      = mnExecutions / 3 // parked executions before the kill…
	mnKillRunning    = 5                // …while the victim runs at least this many
	mnDeadline       = 90 * time.Second // the whole test
)

// TestMultiNodeKill is the multi-node kill test (issue 6, item 6): three
// worker OS processes share one PostgreSQL schema and run 300 executions of
// a flow with steps, a Parallel block of three branches and a gate; worker 2
// is killed with SIGKILL while it drives steps.
//
// Timeline:
//  1. the schema is migrated and an effects table created in it; three
//     workers (this test binary re-executed, see TestMultiNodeWorkerProcess)
//     announce their servers;
//  2. 300 start packages go through a SupervisingDispatcher over three
//     workerhttp.RemoteWorkers, execution i preferring worker i%3, at most
//     45 in flight;
//  3. once 100 executions have parked and worker 2 runs at least 5, worker
//     2 is SIGKILLed; its in-flight starts fail and are re-dispatched to a
//     survivor, which reports them once Recover (on either survivor, after
//     the dead worker's leases expire) has re-driven them to their gate;
//  4. right after the kill every execution's gate is answered by a resume
//     package, execution i preferring worker (i+1)%3 — so most resumes land
//     on another node than the start, and those meant for worker 2 fail
//     over; "not started yet" and "not parked yet" are retried;
//  5. the log is polled until all 300 executions have completed; the
//     survivors are stopped (stdin closed) and must exit cleanly.
//
// Then it checks that every execution completed with its own answer; that
// every log's sequences are 0..n-1; that each step has exactly one
// STEP_COMPLETED, naming the last recorded run of its effect; that a step
// ran twice only in an execution worker 2 was driving when it died, first
// on worker 2 before the kill (its completion never durable) and then on a
// survivor; that EXECUTION_RECOVERED appears exactly once in exactly those
// executions (at least one); and that every result a worker acknowledged
// (execution, sequence, status) is in the log.
func TestMultiNodeKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), mnDeadline)
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
	adminExec(t, effectsSinkDDL(schema))
	t.Logf("schema %s", schema)
	token := randomToken(t)
	cluster := startCluster(t, killWorker, schema, token)
	ids := make([]string, mnExecutions)
	for i := range ids {
		ids[i] = fmt.Sprintf("mn-%03d", i)
	}
	r := newRouter(t, cluster, token, ids)
	sup, err := dispatch.NewSupervisingDispatcher(r, dispatch.SupervisorOptions{
		MaxRestarts: 8, BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
		FailureThreshold: 50, CoolDown: time.Second, TargetOf: r.target,
	})
	if err != nil {
		t.Fatal(err)
	}
	run := &multinodeRun{t: t, ctx: ctx, sup: sup, router: r, cluster: cluster, ids: ids, st: st, killed: make(chan struct{})}
	run.drive()
	t.Logf("all %d dispatches answered %s after the start; worker-%d killed at %d after %d parks",
		2*mnExecutions, time.Since(began).Round(time.Millisecond), mnKilled, run.killT, run.parkedAtKill)
	if t.Failed() {
		return
	}
	waitAllCompleted(t, ctx, st.DB, mnExecutions)
	for i, p := range cluster {
		if i != mnKilled {
			p.stop(t)
		}
	}
	checkMultinode(t, ctx, st, run)
	t.Logf("done in %s", time.Since(began).Round(time.Millisecond))
}

// multinodeRun is one run of the dispatch phases and what they observed.
type multinodeRun struct {
	t       *testing.T
	ctx     context.Context
	sup     dispatch.Dispatcher
	router  *router
	cluster []*workerProcess
	ids     []string
	st      Stores

	parked       atomic.Int64
	killOnce     sync.Once
	killed       chan struct{} // closed once the victim is dead and killT set
	killT        int64         // epoch ms after the victim was reaped
	parkedAtKill int64

	mu   sync.Mutex
	acks []ack
}

// ack is a result a worker acknowledged: the execution at Sequence had
// Status.
type ack struct {
	kind string
	res  dispatch.ExecutionResult
}

// drive runs phases 2–4: every start, the kill, every resume.
func (m *multinodeRun) drive() {
	slots := make(chan struct{}, mnStartsInFlight)
	issued := make([]chan struct{}, len(m.ids))
	var wg sync.WaitGroup
	for i, id := range m.ids {
		issued[i] = make(chan struct{})
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
			case <-m.ctx.Done():
				m.t.Errorf("%s: never started: %v", id, m.ctx.Err())
				return
			}
			close(issued[i])
			defer func() { <-slots }()
			res, ok := m.dispatch(dispatch.ExecutionPackage{ExecutionID: id, FlowID: mnFlowID})
			if ok && res.Status == fold.StatusSuspended {
				m.parked.Add(1)
			}
			m.maybeKill()
		})
	}
	for i, id := range m.ids {
		wg.Go(func() {
			for _, ch := range []chan struct{}{m.killed, issued[i]} {
				select {
				case <-ch:
				case <-m.ctx.Done():
					m.t.Errorf("%s: never resumed: %v", id, m.ctx.Err())
					return
				}
			}
			m.dispatch(dispatch.ExecutionPackage{ExecutionID: id, FlowID: mnFlowID,
				Resume: &dispatch.ResumeHint{EventType: mnGate, Payload: answerOf(id)}})
		})
	}
	wg.Wait()
	select {
	case <-m.killed:
	default:
		m.t.Errorf("worker-%d was never killed: the run never had %d parks while it drove %d executions",
			mnKilled, mnKillAfter, mnKillRunning)
	}
}

// answerOf is the gate answer of execution id, which its output echoes.
func answerOf(id string) json.RawMessage { return json.RawMessage(strconv.Quote("ok-" + id)) }

// maybeKill kills the victim once enough executions have parked while it
// is still driving some.
func (m *multinodeRun) maybeKill() {
	if m.parked.Load() < mnKillAfter || m.router.inFlight(mnKilled) < mnKillRunning {
		return
	}
	m.killOnce.Do(func() {
		m.parkedAtKill = m.parked.Load()
		m.killT = m.cluster[mnKilled].kill(m.t)
		close(m.killed)
	})
}

// dispatch sends pkg until a worker answers it, retrying what may succeed
// later: a failed or dead worker, an execution not started yet (a resume
// that overtook its start) or not parked yet. It records the answer as an
// ack; false means it gave up, the test failed.
func (m *multinodeRun) dispatch(pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, bool) {
	backoff := 50 * time.Millisecond
	for {
		res, err := m.sup.Dispatch(m.ctx, pkg)
		var refused *loom.ResumeRefusedError
		switch {
		case err == nil:
			m.mu.Lock()
			m.acks = append(m.acks, ack{kind: pkg.Kind(), res: res})
			m.mu.Unlock()
			return res, true
		case m.ctx.Err() != nil:
			m.t.Errorf("%s %s: %v (last: %v)", pkg.Kind(), pkg.ExecutionID, m.ctx.Err(), err)
			return dispatch.ExecutionResult{}, false
		case errors.As(err, &refused) && refused.Reason == loom.RefusedNotSuspended,
			errors.Is(err, loom.ErrExecutionNotFound) && pkg.Kind() == "resume",
			dispatch.IsRetryable(err), errors.Is(err, dispatch.ErrRestartsExhausted), errors.Is(err, dispatch.ErrCircuitOpen):
			// may succeed later: retried below
		default:
			m.t.Errorf("%s %s: %v", pkg.Kind(), pkg.ExecutionID, err)
			return dispatch.ExecutionResult{}, false
		}
		timer := time.NewTimer(backoff)
		select {
		case <-timer.C:
		case <-m.ctx.Done():
			timer.Stop()
		}
		backoff = min(2*backoff, time.Second)
	}
}

// waitAllCompleted polls the log until n executions have completed.
func waitAllCompleted(t *testing.T, ctx context.Context, db *DB, n int64) {
	t.Helper()
	q := `SELECT count(*) FROM ` + quoted(db.Schema()) + `.events WHERE event_type = $1`
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var done int64
		if err := db.Pool().QueryRow(ctx, q, event.ExecutionCompleted).Scan(&done); err != nil {
			t.Fatalf("counting completed executions: %v", err)
		}
		if done == n {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%d of %d executions completed before the deadline", done, n)
		}
	}
}

// router is the placement under the supervisor: each package goes to its
// preferred worker (execution i: worker i%3 for a start, (i+1)%3 for a
// resume) unless that worker failed to answer at the transport level, in
// which case it is marked down and the next live worker gets the package.
// It also counts packages in flight per worker and remembers where each
// package was first sent.
type router struct {
	workers []dispatch.WorkerRuntime
	index   map[string]int // execution id → i

	mu       sync.Mutex
	down     []bool
	inflight []int
	first    map[string]int // kind/execution id → worker of the first attempt
}

func newRouter(t *testing.T, cluster []*workerProcess, token string, ids []string) *router {
	t.Helper()
	transport := &http.Transport{MaxIdleConnsPerHost: 2 * mnStartsInFlight}
	t.Cleanup(transport.CloseIdleConnections)
	r := &router{index: map[string]int{}, down: make([]bool, len(cluster)), inflight: make([]int, len(cluster)),
		first: map[string]int{}}
	for _, p := range cluster {
		w, err := workerhttp.NewRemoteWorker("http://"+p.addr, workerhttp.ClientOptions{
			Token: token, HTTPClient: &http.Client{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		r.workers = append(r.workers, w)
	}
	for i, id := range ids {
		r.index[id] = i
	}
	return r
}

// pickLocked is the worker pkg goes to now.
func (r *router) pickLocked(pkg dispatch.ExecutionPackage) int {
	pref := r.index[pkg.ExecutionID]
	if pkg.Kind() != "start" {
		pref++
	}
	for k := range len(r.workers) {
		if w := (pref + k) % len(r.workers); !r.down[w] {
			return w
		}
	}
	return pref % len(r.workers)
}

// target names the worker pkg goes to now: the supervisor's breaker key.
func (r *router) target(pkg dispatch.ExecutionPackage) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "worker-" + strconv.Itoa(r.pickLocked(pkg))
}

// Dispatch implements dispatch.Dispatcher.
func (r *router) Dispatch(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	r.mu.Lock()
	w := r.pickLocked(pkg)
	if _, ok := r.first[pkg.Kind()+"/"+pkg.ExecutionID]; !ok {
		r.first[pkg.Kind()+"/"+pkg.ExecutionID] = w
	}
	r.inflight[w]++
	r.mu.Unlock()
	res, err := r.workers[w].Execute(ctx, pkg)
	r.mu.Lock()
	r.inflight[w]--
	var te *workerhttp.TransportError
	if errors.As(err, &te) {
		r.down[w] = true
	}
	r.mu.Unlock()
	return res, err
}

func (r *router) inFlight(w int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inflight[w]
}

// firstSent returns the worker the first attempt of kind for id went to.
func (r *router) firstSent(kind, id string) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.first[kind+"/"+id]
	return w, ok
}

// workerProcess is one worker OS process: the test binary re-executed.
type workerProcess struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	out   *lockedBuffer // its stdout (past the address line) and stderr
	done  chan struct{} // closed once it exited and was reaped
	err   error         // cmd.Wait's, once done
}

// startCluster starts the workers on schema and waits for every one to
// announce its address. At cleanup any worker still running is killed, and
// on failure each worker's output is logged.
func startCluster(t *testing.T, w workerEntry, schema, token string) []*workerProcess {
	t.Helper()
	cluster := make([]*workerProcess, mnWorkers)
	t.Cleanup(func() {
		for _, p := range cluster {
			if p == nil {
				continue
			}
			select {
			case <-p.done:
			default:
				_ = p.cmd.Process.Kill()
				<-p.done
			}
			if t.Failed() {
				t.Logf("%s output:\n%s", p.name, p.out.tail(16<<10))
			}
		}
	})
	addrs := make(chan error, mnWorkers)
	for i := range cluster {
		p, err := spawnWorker(w, i, schema, token, addrs)
		if err != nil {
			t.Fatal(err)
		}
		cluster[i] = p
	}
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for range cluster {
		select {
		case err := <-addrs:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline.C:
			t.Fatal("the workers did not announce their addresses within a minute")
		}
	}
	return cluster
}

// workerEntry names the test a worker process runs and the variable that
// gives it its number: one per multi-node test.
type workerEntry struct{ test, env string }

var (
	killWorker  = workerEntry{"TestMultiNodeWorkerProcess", workerIDEnv}
	queueWorker = workerEntry{"TestMultiNodeQueueWorkerProcess", mnqWorkerEnv}
)

// spawnWorker starts worker i of w; its address (or why there is none) arrives
// on addrs.
func spawnWorker(w workerEntry, i int, schema, token string, addrs chan<- error) (*workerProcess, error) {
	p := &workerProcess{name: "worker-" + strconv.Itoa(i), out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^"+w.test+"$", "-test.count=1", "-test.timeout=10m")
	p.cmd.Env = append(os.Environ(), w.env+"="+strconv.Itoa(i), workerSchemaEnv+"="+schema, workerTokenEnv+"="+token)
	p.cmd.Stderr = p.out
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		announced := false
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if addr, ok := strings.CutPrefix(line, workerAddrPrefix); ok && !announced {
				p.addr, announced = addr, true
				addrs <- nil
				continue
			}
			fmt.Fprintln(p.out, line)
		}
		if !announced {
			addrs <- fmt.Errorf("%s exited before announcing its address", p.name)
		}
	}()
	go func() {
		<-read // Wait closes stdout: read it to the end first
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill SIGKILLs the worker, reaps it and returns the time after, in epoch
// milliseconds: every event the worker stamped is at or before it.
func (p *workerProcess) kill(t *testing.T) int64 {
	if err := p.cmd.Process.Kill(); err != nil {
		t.Errorf("killing %s: %v", p.name, err)
	}
	<-p.done
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() != -1 {
		t.Errorf("%s ended with %v, want killed by a signal", p.name, p.err)
	}
	return time.Now().UnixMilli()
}

// stop closes the worker's stdin, which shuts it down in order, and
// requires a clean exit (no failure, no data race) within a minute.
func (p *workerProcess) stop(t *testing.T) {
	if err := p.stdin.Close(); err != nil {
		t.Errorf("closing the stdin of %s: %v", p.name, err)
	}
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		t.Errorf("%s did not stop within a minute of its stdin closing", p.name)
		return
	}
	if p.err != nil {
		t.Errorf("%s exited with %v:\n%s", p.name, p.err, p.out.tail(16<<10))
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// tail returns the last n bytes written.
func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// randomToken returns a fresh bearer token for the workers.
func randomToken(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// checkMultinode runs every assertion of TestMultiNodeKill on the final
// log, the effects table and the acks.
func checkMultinode(t *testing.T, ctx context.Context, st Stores, m *multinodeRun) {
	t.Helper()
	runs := readEffects(t, ctx, st.DB)
	logs := map[string][]event.Envelope{}
	driving := map[string]bool{} // executions the victim drove when it died
	recovered := map[string]bool{}
	reran := 0
	for _, id := range m.ids {
		evs, err := store.Read(ctx, st.Events, id)
		if err != nil {
			t.Fatalf("reading %s: %v", id, err)
		}
		logs[id] = evs
		checkLog(t, id, evs)
		if w, ok := m.router.firstSent("start", id); ok && w == mnKilled && victimWasDriving(evs, m.killT) {
			driving[id] = true
		}
		if n := countType(evs, event.ExecutionRecovered); n > 0 {
			recovered[id] = true
			if n != 1 {
				t.Errorf("%s: %d EXECUTION_RECOVERED, want at most 1", id, n)
			}
		}
		reran += checkSteps(t, id, evs, runs[id], driving[id], m.killT)
	}
	for _, id := range m.ids {
		if driving[id] != recovered[id] {
			t.Errorf("%s: recovered %v, but the killed worker drove it at its death: %v; its log:\n%s",
				id, recovered[id], driving[id], timeline(logs[id]))
		}
	}
	if len(driving) == 0 {
		t.Errorf("worker-%d drove no execution when it was killed: the kill was not mid-run", mnKilled)
	}
	checkAcks(t, logs, m.acks)
	t.Logf("worker-%d was driving %d executions when killed; all were recovered; %d steps ran twice, each first on it; %d acks checked",
		mnKilled, len(driving), reran, len(m.acks))
	if t.Failed() {
		t.Logf("schema %s, kill at %d, executions driven by the victim: %v", st.DB.Schema(), m.killT, sortedKeys(driving))
	}
}

// checkLog requires a completed log whose sequences are exactly 0..n-1 and
// whose output is the execution's own gate answer.
func checkLog(t *testing.T, id string, evs []event.Envelope) {
	t.Helper()
	for i, e := range evs {
		if e.Sequence != int64(i) {
			t.Errorf("%s: event %d has sequence %d: a gap or a duplicate", id, i, e.Sequence)
			return
		}
	}
	s := fold.Fold(evs)
	switch {
	case s.Sequence != int64(len(evs))-1:
		t.Errorf("%s: folded sequence %d over %d events", id, s.Sequence, len(evs))
	case s.Status != fold.StatusCompleted:
		t.Errorf("%s: status %s, want completed", id, s.Status)
	case !bytes.Equal(s.Variables.Output, answerOf(id)):
		t.Errorf("%s: output %s, want its answer %s", id, s.Variables.Output, answerOf(id))
	}
}

// victimWasDriving reports whether the events stamped up to killT — all the
// killed worker wrote, and nothing a survivor wrote to an execution started
// there (survivors touch it only after killT) — leave it running.
func victimWasDriving(evs []event.Envelope, killT int64) bool {
	n := 0
	for n < len(evs) && evs[n].Timestamp <= killT {
		n++
	}
	s := fold.Fold(evs[:n])
	return n > 0 && (s.Status == fold.StatusRunning || s.Status == fold.StatusPending)
}

// timeline prints a log one event a line, for a failure message.
func timeline(evs []event.Envelope) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %3d %d %-20s %s %.120s\n", e.Sequence, e.Timestamp, e.Type, e.Metadata, e.Payload)
	}
	return b.String()
}

func countType(evs []event.Envelope, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// effectRun is one row of the effects table: one run of a step's effect.
type effectRun struct {
	run, step, key, worker string
	attempt, at            int64
}

// readEffects reads the effects table by execution, each step's runs in
// the order they happened.
func readEffects(t *testing.T, ctx context.Context, db *DB) map[string]map[string][]effectRun {
	t.Helper()
	rows, err := db.Pool().Query(ctx, `SELECT execution_id, run, step_id, idempotency_key, worker, attempt, at FROM `+
		quoted(db.Schema())+`.effects ORDER BY execution_id, step_id, at, run`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]effectRun{}
	var exec string
	var r effectRun
	_, err = pgx.ForEachRow(rows, []any{&exec, &r.run, &r.step, &r.key, &r.worker, &r.attempt, &r.at}, func() error {
		if out[exec] == nil {
			out[exec] = map[string][]effectRun{}
		}
		out[exec][r.step] = append(out[exec][r.step], r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkSteps requires each step of id to have exactly one STEP_COMPLETED,
// naming the last run of its effect, and a step to have run twice only if
// the killed worker drove id when it died: its first run on that worker
// before the kill, its second on a survivor, whose completion is the one
// in the log. It returns how many steps ran twice.
func checkSteps(t *testing.T, id string, evs []event.Envelope, runs map[string][]effectRun, driven bool, killT int64) int {
	t.Helper()
	type completion struct {
		out stepRun
		at  int64
	}
	done := map[string][]completion{}
	for _, e := range evs {
		if e.Type != event.StepCompleted {
			continue
		}
		var p struct {
			StepID string  `json:"stepId"`
			Output stepRun `json:"output"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Errorf("%s: STEP_COMPLETED %d: %v", id, e.Sequence, err)
			continue
		}
		done[p.StepID] = append(done[p.StepID], completion{p.Output, e.Timestamp})
	}
	victim := "worker-" + strconv.Itoa(mnKilled)
	reran := 0
	for _, step := range mnStepIDs() {
		c, rs := done[step], runs[step]
		if len(c) != 1 || len(rs) == 0 {
			t.Errorf("%s/%s: %d STEP_COMPLETED and %d runs, want 1 and at least 1", id, step, len(c), len(rs))
			continue
		}
		last := rs[len(rs)-1]
		if c[0].out.Run != last.run {
			t.Errorf("%s/%s: the log completed run %q, not the last run %q (runs %+v)", id, step, c[0].out.Run, last.run, rs)
		}
		if len(rs) == 1 {
			continue
		}
		reran++
		switch first := rs[0]; {
		case !driven:
			t.Errorf("%s/%s ran %d times though the killed worker was not driving it: %+v", id, step, len(rs), rs)
		case len(rs) != 2 || first.worker != victim || first.at > killT || last.worker == victim:
			t.Errorf("%s/%s: runs %+v, want one on %s before the kill at %d and one on a survivor", id, step, rs, victim, killT)
		case c[0].at <= killT || first.key != last.key:
			t.Errorf("%s/%s: completed at %d (kill at %d); keys %q and %q, want a completion after the kill under the same key",
				id, step, c[0].at, killT, first.key, last.key)
		}
	}
	for step := range done { //loom:order-independent a membership check
		if _, ok := runs[step]; !ok {
			t.Errorf("%s: STEP_COMPLETED of %q, which no effect ran", id, step)
		}
	}
	if reran > len(mnBranches) {
		t.Errorf("%s: %d steps ran twice, more than the %d a drive runs at once", id, reran, len(mnBranches))
	}
	return reran
}

// checkAcks requires every acknowledged result to be in the log: an event
// at its sequence, of the type that settles its status, with the prefix up
// to it folding to that status.
func checkAcks(t *testing.T, logs map[string][]event.Envelope, acks []ack) {
	t.Helper()
	settling := map[fold.Status]string{fold.StatusSuspended: event.ExecutionSuspended, fold.StatusCompleted: event.ExecutionCompleted}
	for _, a := range acks {
		evs, seq := logs[a.res.ExecutionID], a.res.Sequence
		if seq < 0 || seq >= int64(len(evs)) {
			t.Errorf("%s of %s acknowledged sequence %d, beyond its log of %d events", a.kind, a.res.ExecutionID, seq, len(evs))
			continue
		}
		typ, checkable := settling[a.res.Status]
		switch s := fold.Fold(evs[:seq+1]); {
		case !checkable:
			t.Errorf("%s of %s acknowledged status %s", a.kind, a.res.ExecutionID, a.res.Status)
		case s.Status != a.res.Status || evs[seq].Type != typ:
			t.Errorf("%s of %s acknowledged %s at %d; the log has %s there (status %s)", a.kind, a.res.ExecutionID,
				a.res.Status, seq, evs[seq].Type, s.Status)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m { //loom:sorted sorted below
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
