package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// runOne runs a flow of one step, the effect of tool "tool", through mws,
// and prints the log's ring facts and the step's outcome.
func runOne(fn effect.Func, input any, mws ...effect.Middleware) {
	reg, _ := effect.NewRegistry(map[string]effect.Func{"tool": fn})
	flow := loom.NewFlow("one", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		out, err := ctx.Execute(&loom.Task{ID: "step", ToolID: "tool"}, input)
		if err != nil {
			return json.Marshal(err.Error())
		}
		return out, nil
	})
	events := memstore.NewEventStore()
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}, Effects: reg, Middleware: mws})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	ctx := context.Background()
	id, _ := rt.Start(ctx, "one", nil)
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		fmt.Println(err)
		return
	}
	evs, _ := store.Read(ctx, events, id)
	for _, e := range evs {
		switch e.Type {
		case event.StepRetrying, event.ResourceMetered, event.QuotaExceeded, event.SafetyBlocked:
			fmt.Println(e.Type, string(e.Payload))
		case event.StepStarted:
			var p struct{ Input json.RawMessage }
			_ = json.Unmarshal(e.Payload, &p)
			fmt.Println(e.Type, "input", string(p.Input))
		}
	}
	fmt.Println("result", string(res.Output))
}

func ExampleRetry() {
	calls := 0
	flaky := func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		calls++
		if calls < 3 {
			return nil, errors.New("503")
		}
		return json.Marshal(ec.IdempotencyKey[strings.IndexByte(ec.IdempotencyKey, '/'):])
	}
	noWait := func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	runOne(flaky, nil, middleware.Retry(middleware.RetryPolicy{MaxAttempts: 3, Sleep: noWait}))
	// Output:
	// STEP_STARTED input null
	// STEP_RETRYING {"attempt":2,"delayMs":100,"error":{"message":"503"},"stepId":"step"}
	// STEP_RETRYING {"attempt":3,"delayMs":200,"error":{"message":"503"},"stepId":"step"}
	// result "/step/3"
}

func ExampleExponentialBackoff() {
	b := middleware.ExponentialBackoff(time.Second, 5*time.Second)
	fmt.Println(b(1), b(2), b(3), b(4))
	// Output: 1s 2s 4s 5s
}

func ExampleDefaultRetryable() {
	fmt.Println(middleware.DefaultRetryable(errors.New("connection reset")),
		middleware.DefaultRetryable(loom.Fail("declined", nil)),
		middleware.DefaultRetryable(context.Canceled))
	// Output: true false false
}

func ExampleMetering() {
	clk := newClock()
	model := func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		clk.Advance(40 * time.Millisecond)
		_ = middleware.Report(ec, middleware.Usage{Tokens: middleware.Amount(1500)})
		return json.RawMessage(`"answer"`), nil
	}
	runOne(model, nil, middleware.Metering(middleware.Meter{Now: clk.Now}, middleware.Budget{Tokens: 10_000}))
	// Output:
	// STEP_STARTED input null
	// RESOURCE_METERED {"stepId":"step","attempt":1,"ms":40,"tokens":1500}
	// result "answer"
}

// An effect reports what it measured; without Metering wired, Report
// records nothing.
func ExampleReport() {
	clk := newClock()
	upload := func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		if err := middleware.Report(ec, middleware.Usage{NetBytes: middleware.Amount(2048),
			CostUSD: middleware.Amount(0.0004)}); err != nil {
			return nil, err
		}
		return json.RawMessage(`true`), nil
	}
	runOne(upload, nil, middleware.Metering(middleware.Meter{Now: clk.Now}, middleware.Budget{}))
	runOne(upload, nil)
	// Output:
	// STEP_STARTED input null
	// RESOURCE_METERED {"stepId":"step","attempt":1,"ms":0,"costUsd":0.0004,"netBytes":2048}
	// result true
	// STEP_STARTED input null
	// result true
}

func ExampleSafety() {
	noShouting := middleware.Validator{
		Name: "no-shouting",
		Input: func(_ *effect.Context, in json.RawMessage) error {
			if strings.Contains(string(in), "!!!") {
				return errors.New("input shouts")
			}
			return nil
		},
	}
	send := func(*effect.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`"sent"`), nil }
	runOne(send, "BUY NOW!!!", middleware.Safety(noShouting))
	// Output:
	// STEP_STARTED input "BUY NOW!!!"
	// SAFETY_BLOCKED {"stepId":"step","toolId":"tool","validator":"no-shouting","phase":"input","reason":"input shouts"}
	// result "loom: step \"step\" failed: middleware: step \"step\" blocked by validator \"no-shouting\" on its input: input shouts"
}

func ExampleRedaction() {
	call := func(_ *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		var req struct{ Token string }
		_ = json.Unmarshal(in, &req)
		return json.Marshal(map[string]any{"authorized": req.Token == "hunter2", "echo": req.Token})
	}
	input := map[string]any{"token": map[string]string{"$secret": "crm"}}
	runOne(call, input, middleware.Redaction(middleware.StaticSecrets{"crm": "hunter2"}))
	// Output:
	// STEP_STARTED input {"token":{"$secret":"crm"}}
	// result {"authorized":true,"echo":{"$secret":"crm"}}
}

func ExampleClaimCheck() {
	content := memstore.NewContentStore()
	report := func(*effect.Context, json.RawMessage) (json.RawMessage, error) {
		return json.Marshal(strings.Repeat("log line\n", 200)) // 2 002 bytes of JSON
	}
	runOne(report, nil, middleware.ClaimCheck(content, middleware.ClaimCheckOptions{
		Digest: func(_ string, out json.RawMessage) json.RawMessage { return json.RawMessage(`{"lines":200}`) },
	}))
	// Output:
	// STEP_STARTED input null
	// result {"$claim":{"ref":"sha256:edfcaa6b50452c42946bf632ad2e4eaa30f8f7b6ce3801f49172b01fcd6c23bb","size":2002,"digest":{"lines":200}}}
}

func ExampleResolve() {
	ctx := context.Background()
	content := memstore.NewContentStore()
	ref, _ := content.Put(ctx, []byte(`"the full report"`))
	env, _ := json.Marshal(middleware.ClaimEnvelope{Claim: middleware.Claim{Ref: ref, Size: 17}})
	full, err := middleware.Resolve(ctx, content, env)
	fmt.Println(string(full), err)
	inline, err := middleware.Resolve(ctx, content, json.RawMessage(`"short"`))
	fmt.Println(string(inline), err)
	// Output:
	// "the full report" <nil>
	// "short" <nil>
}

func ExampleParseClaim() {
	ref := store.ContentRef([]byte(`"x"`))
	c, ok := middleware.ParseClaim(json.RawMessage(`{"$claim":{"ref":"` + ref + `","size":3,"digest":{"rows":1}}}`))
	fmt.Println(ok, c.Size, string(c.Digest))
	_, ok = middleware.ParseClaim(json.RawMessage(`{"rows":1}`))
	fmt.Println(ok)
	// Output:
	// true 3 {"rows":1}
	// false
}
