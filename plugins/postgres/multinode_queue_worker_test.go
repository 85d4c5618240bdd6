package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/internal/loopback"
	"github.com/loom-kernel/loom/plugins/workerhttp"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/telemetry"
)

// The worker side of TestMultiNodeQueueKill: the test binary re-executed as
// one worker OS process (see TestMultiNodeWorkerProcess for the pattern).
// It serves one loom.Runtime over the shared schema through a workerhttp
// server, with the runtime's telemetry served as Prometheus text at
// /metrics on the same loopback listener, fires due timers every
// mnqTimerPoll through exclusive claims (store.TimerClaimer), and recovers
// abandoned executions automatically, until its stdin closes (or it is
// killed).

// mnqWorkerEnv holds the number of a queue-test worker (0..2); the schema
// and the token come through workerSchemaEnv and workerTokenEnv.
const mnqWorkerEnv = "LOOM_MNQ_WORKER"

// mnqMetricsPath is where a worker serves its Prometheus metrics.
const mnqMetricsPath = "/metrics"

// Timing of a queue-test worker. Only liveness hangs on these, never an
// assertion: a lease (and a timer claim, which lives a lease TTL) lives
// mnqLeaseTTL without a heartbeat, a recovery pass runs every
// mnqRecoverEvery, the timer poller runs every mnqTimerPoll, and every
// flow sleeps mnqSleep on the runtime's (real) clock.
const (
	mnqLeaseTTL     = 2 * time.Second
	mnqHeartbeat    = 200 * time.Millisecond
	mnqRecoverEvery = 500 * time.Millisecond
	mnqTimerPoll    = 20 * time.Millisecond
	mnqSleep        = 50 * time.Millisecond
)

// mnqFlowID is the flow every queue-test worker registers.
const mnqFlowID = "mnq"

// mnqDDL creates the tables the flows and the timer wrapper write:
//
//   - mnq_inside: the executions between their "enter" and "leave"
//     effects, keyed by execution id, so a re-run of either effect (a
//     survivor re-driving what the killed worker ran without making its
//     STEP_COMPLETED durable) changes nothing;
//   - mnq_gauge: one row, n the size of mnq_inside and max_n the largest n
//     ever, both written under the row's lock;
//   - mnq_entries: every run of "enter", re-runs included (the start
//     markers);
//   - mnq_timer_claims: every timer a worker's ClaimDue handed it, with
//     the claim's time and TTL.
func mnqDDL(schema string) []string {
	s := quoted(schema)
	return []string{
		`CREATE TABLE ` + s + `.mnq_inside (execution_id text PRIMARY KEY)`,
		`CREATE TABLE ` + s + `.mnq_gauge (id int PRIMARY KEY, n bigint NOT NULL, max_n bigint NOT NULL)`,
		`INSERT INTO ` + s + `.mnq_gauge VALUES (1, 0, 0)`,
		`CREATE TABLE ` + s + `.mnq_entries (execution_id text NOT NULL, worker text NOT NULL, at bigint NOT NULL, inside bigint NOT NULL)`,
		`CREATE TABLE ` + s + `.mnq_timer_claims (key text NOT NULL, wake_at bigint NOT NULL, execution_id text NOT NULL,
			worker text NOT NULL, claimed_at bigint NOT NULL, ttl bigint NOT NULL)`,
	}
}

// mnqGauge moves execution id into (enter) or out of mnq_inside and sets
// the gauge from the set's size, all under the gauge row's lock: each
// holder counts after the previous one committed, so max_n is the exact
// largest number of executions ever inside at once. It returns n.
func mnqGauge(ctx context.Context, db *DB, id, worker string, enter bool) (int64, error) {
	s := quoted(db.Schema())
	var n int64
	err := pgx.BeginFunc(ctx, db.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM `+s+`.mnq_gauge WHERE id = 1 FOR UPDATE`); err != nil {
			return err
		}
		move := `DELETE FROM ` + s + `.mnq_inside WHERE execution_id = $1`
		if enter {
			move = `INSERT INTO ` + s + `.mnq_inside VALUES ($1) ON CONFLICT DO NOTHING`
		}
		if _, err := tx.Exec(ctx, move, id); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `UPDATE `+s+`.mnq_gauge SET n = c.n, max_n = greatest(max_n, c.n)
			FROM (SELECT count(*) AS n FROM `+s+`.mnq_inside) c WHERE id = 1 RETURNING mnq_gauge.n`).Scan(&n)
		if err != nil || !enter {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO `+s+`.mnq_entries VALUES ($1, $2, $3, $4)`, id, worker, time.Now().UnixMilli(), n)
		return err
	})
	return n, err
}

// mnqFlow builds the flow of worker: the step "enter" (into the gauge),
// the step "leave" (out of it), a durable Sleep of mnqSleep, and the
// output worker — the name of the node whose drive completed the
// execution, which is the node that made EXECUTION_COMPLETED durable and
// so the one whose loom.executions.completed counted it.
//
// The queue's Concurrency covers a claim until its dispatch settles: the
// start package returns once the execution parks on the Sleep. The gauge
// brackets exactly the part of the flow before the park, so an execution
// is inside only while its claim is live, and max_n can never pass the
// limit; the timer's wait and the drive after it hold no claim and are
// outside on purpose.
func mnqFlow(db *DB, worker string) *loom.Flow {
	step := func(id string, enter bool) *loom.Step[struct{}, int64] {
		return loom.NewStep(id, func(ctx context.Context, _ struct{}) (int64, error) {
			ec := effect.FromContext(ctx)
			if ec == nil {
				return 0, errors.New("mnq: effect without an effect context")
			}
			return mnqGauge(ctx, db, ec.ExecutionID, worker, enter)
		})
	}
	enter, leave := step("enter", true), step("leave", false)
	return loom.NewFlow(mnqFlowID, func(ctx *loom.Context, _ struct{}) (string, error) {
		if _, err := loom.Run(ctx, enter, struct{}{}); err != nil {
			return "", err
		}
		if _, err := loom.Run(ctx, leave, struct{}{}); err != nil {
			return "", err
		}
		if err := ctx.Sleep(mnqSleep); err != nil {
			return "", err
		}
		return worker, nil
	})
}

// claimRecordingTimers is the worker's TimerStore: the schema's, with
// every timer ClaimDue hands this worker recorded in mnq_timer_claims
// before the runtime fires it (a worker killed between the claim and the
// record leaves no row; the timer is claimed again at its claim's expiry).
type claimRecordingTimers struct {
	store.TimerStore
	claimer store.TimerClaimer
	db      *DB
	worker  string
}

var _ store.TimerClaimer = (*claimRecordingTimers)(nil)

// ClaimDue implements store.TimerClaimer: the store's claim, then one
// INSERT recording it. A failed record fails the call (the timers stay
// claimed until their expiry, then anyone fires them).
func (c *claimRecordingTimers) ClaimDue(ctx context.Context, owner string, now, ttl int64, limit int) ([]store.Timer, error) {
	due, err := c.claimer.ClaimDue(ctx, owner, now, ttl, limit)
	if err != nil || len(due) == 0 {
		return due, err
	}
	keys, wakes, ids := make([]string, len(due)), make([]int64, len(due)), make([]string, len(due))
	for i, t := range due {
		keys[i], wakes[i], ids[i] = t.Key, t.WakeAt, t.ExecutionID
	}
	_, err = c.db.Pool().Exec(ctx, `INSERT INTO `+quoted(c.db.Schema())+`.mnq_timer_claims
		SELECT k, w, e, $4, $5, $6 FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(k, w, e)`,
		keys, wakes, ids, c.worker, now, ttl)
	if err != nil {
		return nil, fmt.Errorf("mnq: recording timer claims: %w", err)
	}
	return due, nil
}

// TestMultiNodeQueueWorkerProcess is not a test of its own: it is the body
// of a worker process that TestMultiNodeQueueKill starts by re-executing
// the test binary with mnqWorkerEnv set. Run any other way, it returns at
// once.
func TestMultiNodeQueueWorkerProcess(t *testing.T) {
	n := os.Getenv(mnqWorkerEnv)
	if n == "" {
		return
	}
	if err := runQueueWorker(n, os.Getenv(workerSchemaEnv), os.Getenv(workerTokenEnv)); err != nil {
		t.Fatalf("worker-%s: %v", n, err)
	}
}

// runQueueWorker runs queue-test worker n until its stdin closes, then
// shuts down in order: the server (in-flight packages finish), the
// runtime, the metrics, the stores.
func runQueueWorker(n, schema, token string) (err error) {
	name := "worker-" + n
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", name)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := Storage(ctx, Options{DSN: poolDSN(os.Getenv(dsnEnv), 16), Schema: schema, Logger: logger})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	claimer, ok := st.Timers.(store.TimerClaimer)
	if !ok {
		return errors.New("the PostgreSQL timer store does not claim timers")
	}
	prom, err := telemetry.NewPrometheus()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, prom.Shutdown(context.Background())) }()
	tel, err := telemetry.New(telemetry.Options{MeterProvider: prom.MeterProvider, Logger: logger})
	if err != nil {
		return err
	}
	cfg := loom.Config{
		Events: st.Events, Snapshots: st.Snapshots, Leases: st.Leases,
		Timers: &claimRecordingTimers{TimerStore: st.Timers, claimer: claimer, db: st.DB, worker: name},
		NodeID: name, LeaseTTL: mnqLeaseTTL, Heartbeat: mnqHeartbeat, TimerPoll: mnqTimerPoll,
		Recovery:   loom.Recovery{Interval: mnqRecoverEvery},
		Durability: loom.StepDurable, Flows: []*loom.Flow{mnqFlow(st.DB, name)}, Logger: logger,
	}
	tel.Wire(&cfg)
	rt, err := loom.New(cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()
	srv, err := workerhttp.NewServer(&dispatch.LocalWorker{Runtime: rt}, workerhttp.Options{
		Authenticate: workerhttp.BearerToken(token), MaxConcurrent: 512, Logger: logger,
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(workerhttp.Path, srv)
	mux.Handle(mnqMetricsPath, prom.Handler)
	ln, err := workerhttp.Listen(workerhttp.DefaultAddr)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- loopback.Serve(ctx, ln, mux, workerhttp.ShutdownGrace) }()
	fmt.Printf("%s%s\n", workerAddrPrefix, ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop this worker
	cancel()
	return <-served
}
