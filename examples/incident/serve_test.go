package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/wire"
)

// TestServe runs `incident serve` as a user would and drives it over HTTP:
// raw JSON-RPC bodies with a plain client (the wire format), then the Go
// client's subscription, then Ctrl-C.
func TestServe(t *testing.T) {
	bin := buildBinary(t)
	db := filepath.Join(t.TempDir(), "served.db")
	cmd := exec.Command(bin, "serve", "-db", db, "-addr", "127.0.0.1:0", "-token", "s3cret", "-as", "ann")
	cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := bufio.NewScanner(stdout)
	var url string
	for lines.Scan() {
		if m := regexp.MustCompile(`^Serving the Loom wire ABI ` + regexp.QuoteMeta(wire.Version) + ` for .* at (http://127\.0\.0\.1:\d+/rpc) as ann`).FindStringSubmatch(lines.Text()); m != nil {
			url = m[1]
			break
		}
	}
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill() // only when the test failed before Ctrl-C
		}
	})
	if url == "" {
		t.Fatalf("serve printed no address; stderr: %s", errOut.String())
	}

	call := func(tok, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m
	}
	code := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}

	if status, m := call("wrong", `{"jsonrpc":"2.0","id":1,"method":"loom.handshake"}`); status != http.StatusUnauthorized || code(m) != wire.CodeUnauthenticated {
		t.Fatalf("a wrong token: HTTP %d %v", status, m)
	}
	_, m := call("s3cret", `{"jsonrpc":"2.0","id":1,"method":"loom.handshake"}`)
	if r := m["result"].(map[string]any); r["wireAbiVersion"] != wire.Version || r["kernelAbiVersion"] == nil {
		t.Fatalf("handshake: %v", m)
	}
	_, m = call("s3cret", `{"jsonrpc":"2.0","id":2,"method":"execution.start","params":{"flowId":"incident.remediate",
		"input":{"service":"checkout","symptom":"p99 latency above 2s"},"executionId":"inc-wire","wait":true}}`)
	st := m["result"].(map[string]any)["state"].(map[string]any)
	gate, _ := st["variables"].(map[string]any)["_suspendedOn"].(map[string]any)["on"].(string)
	if st["status"] != "suspended" || !isApprovalGate(gate) {
		t.Fatalf("start: %v", m)
	}
	_, m = call("s3cret", `{"jsonrpc":"2.0","id":3,"method":"execution.resume","params":{"executionId":"inc-wire","eventType":"`+gate+`","payload":{"decision":"yes"}}}`)
	if code(m) != wire.CodePayloadInvalid {
		t.Fatalf("an answer off the schema: %v", m)
	}

	c, err := wire.NewClient(strings.TrimSuffix(url, wire.Path), wire.WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := c.Subscribe(ctx, wire.SubscribeParams{ExecutionID: "inc-wire"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	_, m = call("s3cret", `{"jsonrpc":"2.0","id":4,"method":"execution.resume","params":{"executionId":"inc-wire","eventType":"`+gate+`","payload":{"decision":"approve","by":"ann"}}}`)
	if m["error"] != nil {
		t.Fatalf("approve: %v", m)
	}
	var approval, turn json.RawMessage
	for e := range sub.Events() {
		switch e.Type {
		case event.ApprovalGranted:
			approval = e.Payload
		case agent.TurnEvent:
			if strings.Contains(string(e.Payload), `"approval"`) {
				turn = e.Payload
			}
		}
		if e.Type == event.ExecutionCompleted {
			break
		}
	}
	if !strings.Contains(string(approval), `"principal":{"user":"ann"}`) {
		t.Fatalf("the gate's answer was not recorded as ann's: %s", approval)
	}
	if !strings.Contains(string(turn), `"principal":{"user":"ann"}`) {
		t.Fatalf("the planner's tool-call log does not carry the verified approver: %s", turn)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Fatalf("serve after Ctrl-C: %v; stderr: %s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s of Ctrl-C")
	}
	out, errText, status := runBinary(t, bin, "status", "inc-wire", "-db", db)
	if status != 0 || !strings.Contains(out, "Status: completed — fixed: approved by ann") {
		t.Fatalf("status after serve: exit %d\n%s%s", status, out, errText)
	}
	if _, errText, status := runBinary(t, bin, "serve", "-db", db); status != 2 || !strings.Contains(errText, "a token is required") {
		t.Fatalf("serve without a token: exit %d %s", status, errText)
	}
	if _, errText, status := runBinary(t, bin, "serve", "-db", db, "-token", "x", "-addr", "0.0.0.0:0"); status != 2 || !strings.Contains(errText, "not a loopback address") {
		t.Fatalf("serve on a public address: exit %d %s", status, errText)
	}
}
