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
	A *ThroughputReport  `json:"a,omitempty"`
	B *ThroughputReport  `json:"b,omitempty"`
	C *ThroughputReport  `json:"c,omitempty"`
	D *ResumeReport      `json:"d,omitempty"`
	E *AgentReport       `json:"e,omitempty"`
	F *ScaleReport       `json:"f,omitempty"`
	G *FanOutReport      `json:"g,omitempty"`
	H *InspectListReport `json:"h,omitempty"`
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

// AgentReport is workload e: the kernel's overhead per agent turn beyond
// its durable commits, at two sizes, against the provider call on the
// local fake server in the same run (Small, Large); the tool-call log's
// bytes per turn in both ToolLog modes (Bytes); and the replay of a parked
// run with no provider call (Replay). Ratio, Target, Comparison and Met
// judge the overhead at the worse size as a fraction of a nominal model
// call of ModelCallMs; Bytes and Replay carry their own figures.
type AgentReport struct {
	Description string `json:"description"`
	// ModelCallMs is the nominal model call the overhead is judged against.
	ModelCallMs     float64 `json:"modelCallMs"`
	ToolOutputBytes int     `json:"toolOutputBytes"` // one tool answer's JSON
	Repetitions     int     `json:"repetitions"`
	// Baseline names what c is made of; each size has its own samples.
	Baseline string           `json:"baseline"`
	Small    AgentTurnsReport `json:"small"`
	Large    AgentTurnsReport `json:"large"`
	// Linearity is Large over Small, per turn: near 1 when a turn costs the
	// same however many came before it.
	Linearity AgentLinearity `json:"linearity"`
	// OverheadMsPerTurn is the worse size's; TargetOverheadMs is
	// Target × ModelCallMs.
	OverheadMsPerTurn float64 `json:"overheadMsPerTurn"`
	TargetOverheadMs  float64 `json:"targetOverheadMs"`
	// Ratio is OverheadMsPerTurn / ModelCallMs, judged against Target.
	Ratio      float64           `json:"ratio"`
	Target     float64           `json:"target"`
	Comparison string            `json:"comparison"`
	Met        bool              `json:"met"`
	Bytes      AgentBytesReport  `json:"bytes"`
	Replay     AgentReplayReport `json:"replay"`
}

// AgentTurnsReport is the timed runs of one size, per turn (a model call
// and, but for the answer turn, its tool step). Each figure is the median
// of the repetitions, whose samples are listed.
type AgentTurnsReport struct {
	ToolTurns int `json:"toolTurns"`
	Turns     int `json:"turns"` // model calls: ToolTurns + 1
	// AgentMsPerTurn is a: the agent's run, Start → completion.
	AgentMsPerTurn float64   `json:"agentMsPerTurn"`
	AgentSamplesMs []float64 `json:"agentSamplesMsPerTurn"`
	// ProviderMsPerCall is b: the same requests by provider.Complete alone.
	ProviderMsPerCall float64   `json:"providerMsPerCall"`
	ProviderSamplesMs []float64 `json:"providerSamplesMsPerCall"`
	// AppendsPerTurn (the mean of the repetitions: the journal's tail
	// writes what is queued when it starts, so it varies a little) and
	// EventsPerTurn are counted by the decorator, the run's start and end
	// included; TransactionsPerTurn is the writer's.
	AppendsPerTurn      float64 `json:"appendsPerTurn"`
	EventsPerTurn       float64 `json:"eventsPerTurn"`
	TransactionsPerTurn float64 `json:"transactionsPerTurn"`
	// RawCommitMs is 1000 / the mean of BaselineSamples, the raw
	// one-row-per-commit rates (rows/s) measured right before and right
	// after this size's runs; CommitMsPerTurn is c: AppendsPerTurn ×
	// RawCommitMs.
	RawCommitMs     float64   `json:"rawCommitMs"`
	BaselineSamples []float64 `json:"baselineSamples"`
	CommitMsPerTurn float64   `json:"commitMsPerTurn"`
	// OverheadMsPerTurn is a − b − c; OverheadFraction its share of the
	// nominal model call; AgentOverProvider is a/b.
	OverheadMsPerTurn float64 `json:"overheadMsPerTurn"`
	OverheadFraction  float64 `json:"overheadFractionOfModelCall"`
	AgentOverProvider float64 `json:"agentOverProvider"`
	// LastRequestBytes is the JSON size of the last turn's request: the
	// transcript every turn sends grows with the turns before it.
	LastRequestBytes int `json:"lastRequestBytes"`
}

// AgentLinearity is the large size's per-turn figures over the small
// size's: a the agent, b the provider alone, a − b the kernel with its
// commits, and the overhead a − b − c.
type AgentLinearity struct {
	AgentMsPerTurn    float64 `json:"agentMsPerTurn"`
	ProviderMsPerCall float64 `json:"providerMsPerCall"`
	KernelMsPerTurn   float64 `json:"kernelMsPerTurn"`
	OverheadMsPerTurn float64 `json:"overheadMsPerTurn"`
}

// AgentBytesReport is what a run of ToolTurns tool turns records, in each
// ToolLog mode. Ratio is LeanOverFull (log bytes), judged against Target.
type AgentBytesReport struct {
	ToolTurns    int           `json:"toolTurns"`
	Turns        int           `json:"turns"`
	Full         AgentLogBytes `json:"full"`
	Lean         AgentLogBytes `json:"lean"`
	LeanClaimed  AgentLogBytes `json:"leanClaimCheck"`
	LeanOverFull float64       `json:"leanOverFull"`
	// LeanClaimedOverFull is the lean log with the app's claim-check ring
	// keeping the tool outputs in the content store, over the full log.
	LeanClaimedOverFull float64 `json:"leanClaimCheckOverFull"`
	LeanOverFullState   float64 `json:"leanOverFullState"`
	Ratio               float64 `json:"ratio"`
	Target              float64 `json:"target"`
	Comparison          string  `json:"comparison"`
	Met                 bool    `json:"met"`
}

// AgentLogBytes is one completed log: its envelopes' event.Encode sizes,
// in all and by kind (the event type, STEP_* and RESOURCE_METERED split
// into the turns' model and tool steps), and its final state's fold.Encode
// size. Per-turn figures divide by the turns (model calls).
type AgentLogBytes struct {
	ToolLog           string  `json:"toolLog"`
	Events            int     `json:"events"`
	LogBytes          int64   `json:"logBytes"`
	BytesPerTurn      float64 `json:"bytesPerTurn"`
	StateBytes        int     `json:"stateBytes"`
	StateBytesPerTurn float64 `json:"stateBytesPerTurn"`
	// StateParts splits StateBytes: the frames of the turns' model steps,
	// of their tool steps and of any other step, the variables, and the
	// rest; the parts sum to StateBytes.
	StateParts map[string]int        `json:"stateParts"`
	ByKind     map[string]*KindBytes `json:"byKind"`
}

// KindBytes is one kind of event's part of a log; Share is of LogBytes.
type KindBytes struct {
	Events       int     `json:"events"`
	Bytes        int64   `json:"bytes"`
	PayloadBytes int64   `json:"payloadBytes"`
	BytesPerTurn float64 `json:"bytesPerTurn"`
	Share        float64 `json:"share"`
}

// AgentReplayReport is the replay of parked runs by a new runtime over
// the reopened file. ProviderRequests is the requests the fake server got
// during every replay: always 0, since one fails the run.
type AgentReplayReport struct {
	ToolTurns        int             `json:"toolTurns"`
	Turns            int             `json:"turns"`
	Repetitions      int             `json:"repetitions"`
	ProviderRequests int             `json:"providerRequests"`
	Full             AgentReplayMode `json:"full"`
	Lean             AgentReplayMode `json:"lean"`
	LeanClaimed      AgentReplayMode `json:"leanClaimCheck"`
}

// AgentReplayMode is one ToolLog mode's replays, medians and samples:
// LiveMs is Start → park durable, ReplayMs the new runtime's Resume →
// completion (the snapshot load, the agent re-run from the log, the end),
// Ratio ReplayMs / LiveMs; OpenMs, reopening the file and building the
// runtime, is outside ReplayMs.
type AgentReplayMode struct {
	LiveMs          float64   `json:"liveMs"`
	ReplayMs        float64   `json:"replayMs"`
	Ratio           float64   `json:"ratio"`
	OpenMs          float64   `json:"openMs"`
	LiveSamplesMs   []float64 `json:"liveSamplesMs"`
	ReplaySamplesMs []float64 `json:"replaySamplesMs"`
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

// medianOf is the median of xs (the mean of the middle two for an even
// count), 0 for none.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

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
