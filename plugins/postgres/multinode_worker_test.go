package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/plugins/workerhttp"
)

// The worker side of TestMultiNodeKill: the test binary re-executed as one
// worker OS process. It serves one loom.Runtime over the shared schema
// through a workerhttp server and re-drives abandoned executions with a
// Recover loop, until its stdin closes (or it is killed).

// Environment of a worker process (the DSN comes through dsnEnv).
const (
	workerIDEnv     = "LOOM_MULTINODE_WORKER" // the worker's number, 0..2
	workerSchemaEnv = "LOOM_MULTINODE_SCHEMA" // the shared schema
	workerTokenEnv  = "LOOM_MULTINODE_TOKEN"  // the bearer token of its server
)

// workerAddrPrefix starts the stdout line on which a worker announces its
// server's address.
const workerAddrPrefix = "LOOM_MULTINODE_ADDR="

// Timing of a worker. Only liveness hangs on these, never an assertion:
// a lease lives workerLeaseTTL without a heartbeat, heartbeats come every
// workerHeartbeat, Recover runs every workerRecoverEvery, and every effect
// spends stepWork (real time: it is the work the kill interrupts).
const (
	workerLeaseTTL     = 6 * time.Second
	workerHeartbeat    = 300 * time.Millisecond
	workerRecoverEvery = 500 * time.Millisecond
	stepWork           = 4 * time.Millisecond
)

// The flow every worker registers. Before its gate it runs mnStepsBefore,
// then a Parallel block of len(mnBranches) branches running the steps
// "<branch>-1" and "<branch>-2"; after the gate, mnStepsAfter.
const (
	mnFlowID = "multinode"
	mnGate   = "approve"
)

var (
	mnStepsBefore = []string{"prepare", "reserve"}
	mnBranches    = []string{"a", "b", "c"}
	mnStepsAfter  = []string{"ship", "notify"}
)

// mnStepIDs lists every step id of one execution, in flow order.
func mnStepIDs() []string {
	ids := append([]string{}, mnStepsBefore...)
	for _, b := range mnBranches {
		ids = append(ids, b+"-1", b+"-2")
	}
	return append(ids, mnStepsAfter...)
}

// stepRun is a step's output: which recorded run of the effect produced it
// (effects.run), so the log's STEP_COMPLETED names the run it kept.
type stepRun struct {
	Run    string `json:"run"`
	Worker string `json:"worker"`
}

// effectsSinkDDL creates the counting sink every effect writes to.
func effectsSinkDDL(schema string) string {
	return `CREATE TABLE ` + quoted(schema) + `.effects (
		run             text PRIMARY KEY,
		execution_id    text NOT NULL,
		step_id         text NOT NULL,
		attempt         bigint NOT NULL,
		idempotency_key text NOT NULL,
		worker          text NOT NULL,
		at              bigint NOT NULL
	)`
}

// multinodeFlow builds the flow of worker; each effect records itself in
// the effects table of db with a plain INSERT (not idempotent on purpose:
// a second run is a second row), then works for stepWork.
func multinodeFlow(db *DB, worker string) *loom.Flow {
	var runs atomic.Int64
	insert := `INSERT INTO ` + quoted(db.Schema()) + `.effects
		(run, execution_id, step_id, attempt, idempotency_key, worker, at) VALUES ($1, $2, $3, $4, $5, $6, $7)`
	step := func(id string) *loom.Step[struct{}, stepRun] {
		return loom.NewStep(id, func(ctx context.Context, _ struct{}) (stepRun, error) {
			ec := effect.FromContext(ctx)
			if ec == nil {
				return stepRun{}, errors.New("multinode: effect without an effect context")
			}
			out := stepRun{Run: worker + "/" + strconv.FormatInt(runs.Add(1), 10), Worker: worker}
			_, err := db.Pool().Exec(ctx, insert, out.Run, ec.ExecutionID, ec.StepID, ec.Attempt, ec.IdempotencyKey,
				worker, time.Now().UnixMilli())
			if err != nil {
				return stepRun{}, err
			}
			t := time.NewTimer(stepWork)
			defer t.Stop()
			select {
			case <-t.C:
				return out, nil
			case <-ctx.Done():
				return stepRun{}, ctx.Err()
			}
		})
	}
	run := func(ctx *loom.Context, ids ...string) error {
		for _, id := range ids {
			if _, err := loom.Run(ctx, step(id), struct{}{}); err != nil {
				return err
			}
		}
		return nil
	}
	return loom.NewFlow(mnFlowID, func(ctx *loom.Context, _ struct{}) (string, error) {
		if err := run(ctx, mnStepsBefore...); err != nil {
			return "", err
		}
		branches := make([]func(*loom.Context) error, len(mnBranches))
		for i, b := range mnBranches {
			branches[i] = func(ctx *loom.Context) error { return run(ctx, b+"-1", b+"-2") }
		}
		if err := ctx.Parallel(branches...); err != nil {
			return "", err
		}
		answer, err := loom.Suspend[string](ctx, mnGate)
		if err != nil {
			return "", err
		}
		if err := run(ctx, mnStepsAfter...); err != nil {
			return "", err
		}
		return answer, nil
	})
}

// TestMultiNodeWorkerProcess is not a test of its own: it is the body of a
// worker process that TestMultiNodeKill starts by re-executing the test
// binary with workerIDEnv set. Run any other way, it returns at once.
func TestMultiNodeWorkerProcess(t *testing.T) {
	n := os.Getenv(workerIDEnv)
	if n == "" {
		return
	}
	if err := runWorker(n, os.Getenv(workerSchemaEnv), os.Getenv(workerTokenEnv)); err != nil {
		t.Fatalf("worker-%s: %v", n, err)
	}
}

// runWorker runs worker n until its stdin closes, then shuts down in order:
// the server (in-flight packages finish), the Recover loop, the runtime,
// the stores.
func runWorker(n, schema, token string) error {
	name := "worker-" + n
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", name)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := Storage(ctx, Options{DSN: poolDSN(os.Getenv(dsnEnv), 24), Schema: schema, Logger: logger})
	if err != nil {
		return err
	}
	defer st.Close()
	rt, err := loom.New(loom.Config{
		Events: st.Events, Snapshots: st.Snapshots, Timers: st.Timers, Leases: st.Leases,
		NodeID: name, LeaseTTL: workerLeaseTTL, Heartbeat: workerHeartbeat,
		Durability: loom.StepDurable, Flows: []*loom.Flow{multinodeFlow(st.DB, name)}, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer rt.Close()
	srv, err := workerhttp.NewServer(&dispatch.LocalWorker{Runtime: rt}, workerhttp.Options{
		Authenticate: workerhttp.BearerToken(token), MaxConcurrent: 512, Logger: logger,
	})
	if err != nil {
		return err
	}
	ln, err := workerhttp.Listen(workerhttp.DefaultAddr)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	recovered := make(chan struct{})
	go func() {
		defer close(recovered)
		recoverLoop(ctx, rt, logger)
	}()
	fmt.Printf("%s%s\n", workerAddrPrefix, ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop this worker
	cancel()
	err = <-served
	<-recovered
	return err
}

// recoverLoop calls Recover every workerRecoverEvery until ctx ends: this
// is how an execution whose driver died (its lease expired, or it never
// took one and shows no activity for a TTL) is taken over.
func recoverLoop(ctx context.Context, rt *loom.Runtime, logger *slog.Logger) {
	tick := time.NewTicker(workerRecoverEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if k, err := rt.Recover(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("multinode: recover", "error", err)
		} else if k > 0 {
			logger.Warn("multinode: recovered executions", "count", k)
		}
	}
}

// poolDSN sets pool_max_conns on dsn (a URL or a key=value string).
func poolDSN(dsn string, conns int) string {
	c := strconv.Itoa(conns)
	switch {
	case !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://"):
		return dsn + " pool_max_conns=" + c
	case strings.Contains(dsn, "?"):
		return dsn + "&pool_max_conns=" + c
	}
	return dsn + "?pool_max_conns=" + c
}
