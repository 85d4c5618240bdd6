// Package ioflow holds the cases of the io check.
package ioflow

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"

	"github.com/loom-kernel/loom"
)

// fetch does I/O in a step: its outcome is recorded.
var fetch = loom.NewStep("fetch", func(ctx context.Context, url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, resp.Body.Close()
})

var IO = loom.NewFlow("io", func(ctx *loom.Context, url string) (int, error) {
	_ = os.Getenv("REGION")          // want `os.Getenv in flow code does I/O, which every replay does again.*: do I/O in a step \(loom.Run, ctx.Run\), whose outcome is recorded`
	f, err := os.Open("config.json") // want `os.Open in flow code does I/O`
	if err == nil {
		_ = f.Close() // want `\(\*os.File\).Close in flow code does I/O`
	}
	_, _ = http.Get(url)              // want `http.Get in flow code does I/O`
	_ = http.DefaultClient.Do         // want `\(\*http.Client\).Do in flow code does I/O`
	_ = exec.Command("true")          // want `exec.Command in flow code does I/O`
	_, _ = net.Dial("tcp", "db:5432") // want `net.Dial in flow code does I/O`

	// What does no I/O: predicates, parsing, building a request.
	if os.IsNotExist(err) {
		_ = err.Error()
	}
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	_ = http.StatusText(http.StatusOK)
	_ = net.JoinHostPort("db", "5432")

	// I/O in steps.
	n, err := loom.Run(ctx, fetch, url)
	if err != nil {
		return 0, err
	}
	if _, err := ctx.Run("host", func(ctx context.Context) (any, error) { return os.Hostname() }); err != nil {
		return 0, err
	}
	read := &loom.Task{ID: "read", Invoke: func(ctx context.Context, _ json.RawMessage) (any, error) { return os.ReadFile("x") }}
	if _, err := ctx.Execute(read, nil); err != nil {
		return 0, err
	}
	return n, nil
})
