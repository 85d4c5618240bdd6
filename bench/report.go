package main

import (
	"encoding/json"
	"io"
	"math"
	"runtime"
	"slices"
	"time"
)

// Report is the one JSON document a run prints: the machine, the raw
// baselines of the store (SQLite or PostgreSQL) measured in this run, and every selected workload beside
// the baseline it is judged against.
type Report struct {
	Machine   Machine         `json:"machine"`
	Config    RunConfig       `json:"config"`
	Raw       RawReport       `json:"raw"`
	Workloads WorkloadReports `json:"workloads"`
}

// Machine identifies where the figures come from: ratios travel between
// machines, absolute rates do not.
type Machine struct {
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	CPUs   int    `json:"cpus"`
	Go     string `json:"go"`
}

// RunConfig echoes the flags the figures were measured under.
type RunConfig struct {
	DurationMs int64 `json:"durationMs"`
	// Store is "sqlite" or "postgres".
	Store string `json:"store"`
	// Synchronous is SQLite's synchronous level, or on PostgreSQL the
	// server's synchronous_commit.
	Synchronous string   `json:"synchronous"`
	Workloads   []string `json:"workloads"`
	DBDir       string   `json:"dbDir,omitempty"` // SQLite only
	// Postgres describes the server, PostgreSQL only.
	Postgres *PostgresConfig `json:"postgres,omitempty"`
}

// PostgresConfig is what decides a PostgreSQL commit's cost, and where the
// run wrote.
type PostgresConfig struct {
	ServerVersion string `json:"serverVersion"`
	Fsync         string `json:"fsync"`
	WalSyncMethod string `json:"walSyncMethod"`
	// Schemas lists every schema the run created, all dropped at its end.
	Schemas []string `json:"schemas"`
}

// RawReport holds the driver-only baselines: the same driver and row shape
// as the store's plugin (on SQLite the same pragmas too), with no Loom code
// in the loop.
type RawReport struct {
	// OneRowPerCommitPerSec is rows/s with one row per transaction: every
	// row pays a commit (an fsync under synchronous=FULL). It and
	// HundredRowsPerTxPerSec are means of the samples below.
	OneRowPerCommitPerSec float64 `json:"oneRowPerCommitPerSec"`
	// HundredRowsPerTxPerSec is rows/s with 100 rows per transaction: the
	// batched ceiling group commit aims at.
	HundredRowsPerTxPerSec float64 `json:"hundredRowsPerTxPerSec"`
	// The samples behind the means, in the order they were taken: one
	// before and one after each workload judged against the baseline.
	OneRowPerCommitSamples []float64 `json:"oneRowPerCommitSamples"`
	HundredRowsSamples     []float64 `json:"hundredRowsPerTxSamples"`
	// ThirtyTwoConnsOneRowPerCommitPerSec is the aggregate rows/s of 32
	// connections each committing one row at a time: PostgreSQL only,
	// where concurrent commits share WAL flushes.
	ThirtyTwoConnsOneRowPerCommitPerSec  float64   `json:"thirtyTwoConnsOneRowPerCommitPerSec,omitempty"`
	ThirtyTwoConnsOneRowPerCommitSamples []float64 `json:"thirtyTwoConnsOneRowPerCommitSamples,omitempty"`
	// PayloadBytes is the payload size of every raw row.
	PayloadBytes int `json:"payloadBytes"`
}

// WorkloadReports holds one entry per selected workload.
type WorkloadReports struct {
	A *ThroughputReport `json:"a,omitempty"`
	B *ThroughputReport `json:"b,omitempty"`
	C *ThroughputReport `json:"c,omitempty"`
	D *ResumeReport     `json:"d,omitempty"`
}

// Comparison directions of a target.
const (
	atLeast = ">="
	atMost  = "<="
)

// ThroughputReport is a whole-workflow workload: its rates, latencies and
// its ratio to the baseline named in Baseline.
type ThroughputReport struct {
	Description     string  `json:"description"`
	Workers         int     `json:"workers"`
	Workflows       int64   `json:"workflows"`
	WorkflowsPerSec float64 `json:"workflowsPerSec"`
	EventsPerSec    float64 `json:"eventsPerSec"`
	// EventsPerWorkflow and AppendsPerWorkflow are counted by a decorator
	// around the event store: every EventStore.Append call and its events.
	EventsPerWorkflow  float64 `json:"eventsPerWorkflow"`
	AppendsPerWorkflow float64 `json:"appendsPerWorkflow"`
	// TransactionsPerWorkflow is the store writer's committed transactions
	// (WriteStats of sqlite.DB or postgres.DB): below AppendsPerWorkflow when group commit
	// folds concurrent appends into shared commits.
	TransactionsPerWorkflow float64 `json:"transactionsPerWorkflow"`
	P50Ms                   float64 `json:"p50Ms"`
	P99Ms                   float64 `json:"p99Ms"`
	// Baseline names what Ratio divides by, BaselineValue its value, and
	// BaselineSamples the raw rates it comes from, measured right before
	// and right after this workload.
	Baseline        string    `json:"baseline"`
	BaselineValue   float64   `json:"baselineValue"`
	BaselineSamples []float64 `json:"baselineSamples"`
	Ratio           float64   `json:"ratio"`
	Target          float64   `json:"target"`
	Comparison      string    `json:"comparison"`
	Met             bool      `json:"met"`
	// On PostgreSQL, workload c is also set beside the raw 32-connection
	// rate, with no target: how much of the server's concurrent commit
	// capacity it uses.
	ThirtyTwoConnsBaselineValue   float64   `json:"thirtyTwoConnsBaselineValue,omitempty"`
	ThirtyTwoConnsBaselineSamples []float64 `json:"thirtyTwoConnsBaselineSamples,omitempty"`
	ThirtyTwoConnsRatio           float64   `json:"thirtyTwoConnsRatio,omitempty"`
}

// ResumeReport compares the resume latency of a parked execution with a
// large log to one with a small log, both with snapshots, along two paths:
// warm (the runtime that parked it answers its sticky park in place) and
// cold (a new runtime over the reopened storage loads and replays). Ratio,
// Target, Comparison and Met judge the warm path; the cold path's ratio is
// reported without a target.
type ResumeReport struct {
	Description string `json:"description"`
	SmallEvents int64  `json:"smallEvents"`
	LargeEvents int64  `json:"largeEvents"`
	// SmallSteps and LargeSteps are the steps the probe ran before its
	// first park: what a cold resume's replay re-issues.
	SmallSteps  int `json:"smallSteps"`
	LargeSteps  int `json:"largeSteps"`
	Repetitions int `json:"repetitions"`
	// SnapshotBytes is the size of the first park's snapshot as stored
	// (zstd), SnapshotJSONBytes the same decompressed; a cold resume loads
	// one of that size (later parks add a few events).
	SmallSnapshotBytes     int `json:"smallSnapshotBytes"`
	LargeSnapshotBytes     int `json:"largeSnapshotBytes"`
	SmallSnapshotJSONBytes int `json:"smallSnapshotJSONBytes"`
	LargeSnapshotJSONBytes int `json:"largeSnapshotJSONBytes"`
	// LargeBuildSec is Start → the first park of the large log;
	// LargeSettleSec how long its periodic snapshots kept being written
	// after that park (the harness waits for them before measuring).
	LargeBuildSec  float64 `json:"largeBuildSec"`
	LargeSettleSec float64 `json:"largeSettleSec"`

	// WarmSmallMs and WarmLargeMs are the medians of the warm repetitions
	// (Resume → next park durable); the samples are listed beside them.
	// WarmRatio is large/small.
	WarmSmallMs        float64   `json:"warmSmallMs"`
	WarmLargeMs        float64   `json:"warmLargeMs"`
	WarmRatio          float64   `json:"warmRatio"`
	WarmSmallSamplesMs []float64 `json:"warmSmallSamplesMs"`
	WarmLargeSamplesMs []float64 `json:"warmLargeSamplesMs"`
	// ResumeCallMs is the median time the Resume call took: it returns
	// once the answer is durable. Warm, that is the gate and one commit;
	// cold, also the snapshot load and the tail. The rest of the latency
	// is the flow going on (cold: replaying) up to the next park.
	WarmSmallResumeCallMs float64 `json:"warmSmallResumeCallMs"`
	WarmLargeResumeCallMs float64 `json:"warmLargeResumeCallMs"`

	// The cold path's figures, as the warm ones. ColdOpenMs is the median
	// time reopening the storage and building the runtime took, before the
	// Resume call and outside the latency.
	ColdSmallMs           float64   `json:"coldSmallMs"`
	ColdLargeMs           float64   `json:"coldLargeMs"`
	ColdRatio             float64   `json:"coldRatio"`
	ColdSmallSamplesMs    []float64 `json:"coldSmallSamplesMs"`
	ColdLargeSamplesMs    []float64 `json:"coldLargeSamplesMs"`
	ColdSmallResumeCallMs float64   `json:"coldSmallResumeCallMs"`
	ColdLargeResumeCallMs float64   `json:"coldLargeResumeCallMs"`
	ColdSmallOpenMs       float64   `json:"coldSmallOpenMs"`
	ColdLargeOpenMs       float64   `json:"coldLargeOpenMs"`
	// ColdTarget is always null: a cold resume replays the flow, so its
	// cost grows with the steps the log holds, and no target applies.
	ColdTarget *float64 `json:"coldTarget"`

	// Ratio is WarmRatio, judged against Target.
	Ratio      float64 `json:"ratio"`
	Target     float64 `json:"target"`
	Comparison string  `json:"comparison"`
	Met        bool    `json:"met"`
}

// judge sets the baseline (its name, value and samples) and the ratio
// measured/value against target, a floor.
func (r *ThroughputReport) judge(baseline string, value float64, samples []float64, measured, target float64) {
	r.Baseline, r.BaselineValue, r.BaselineSamples = baseline, round(value), samples
	r.Target, r.Comparison = target, atLeast
	if value > 0 {
		r.Ratio = round(measured / value)
	}
	r.Met = value > 0 && measured/value >= target
}

// currentMachine describes this process's platform.
func currentMachine() Machine {
	return Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
}

// writeReport prints r as one indented JSON document.
func writeReport(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// samples, sorting them in place; 0 for none.
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	rank := int(math.Ceil(p / 100 * float64(len(samples))))
	return samples[min(max(rank, 1), len(samples))-1]
}

// median is the 50th percentile.
func median(samples []time.Duration) time.Duration { return percentile(samples, 50) }

// mean is the arithmetic mean, 0 for none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// roundAll rounds every sample for the report.
func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = round(x)
	}
	return out
}

// millis renders d in milliseconds.
func millis(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }

// perSecond is the rate of n in d.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// round keeps four significant decimals, enough for ratios and rates.
func round(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1e4) / 1e4
}
