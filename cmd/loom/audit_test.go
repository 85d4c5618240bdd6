package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/auditchain"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// auditKey is the HMAC key of the audit fixture.
var auditKey = []byte("loom-cli-audit-test-key-32-bytes")

// buildAuditFixture writes a store whose log is chained under auditKey:
// order-a answered and completed, order-b parked at the gate. It returns
// the store's path and the key file's.
func buildAuditFixture(t *testing.T) (path, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	path, keyFile = filepath.Join(dir, "audit.db"), filepath.Join(dir, "audit.key")
	if err := os.WriteFile(keyFile, auditKey, 0o600); err != nil {
		t.Fatal(err)
	}
	var wrapErr error
	a, err := openAppWith(path, newStepClock("2026-01-05T09:00:00Z"), func(cfg *loom.Config, _ sqlite.Stores) {
		var events *auditchain.EventStore
		events, wrapErr = auditchain.Wrap(cfg.Events, auditchain.Options{Key: auditKey})
		if wrapErr == nil {
			cfg.Events = events
		}
	})
	if err != nil || wrapErr != nil {
		t.Fatal(errors.Join(err, wrapErr))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = func() error {
		for _, id := range []string{"order-a", "order-b"} {
			if _, err := a.rt.Start(ctx, flowOrder, order{Item: "sencha", Qty: 2}, loom.WithExecutionID(id)); err != nil {
				return err
			}
			if _, err := a.rt.WaitForSettled(ctx, id); err != nil {
				return err
			}
		}
		st, err := a.answer(ctx, "order-a", "alice", true)
		if err == nil && st.Status != fold.StatusCompleted {
			err = errors.New("order-a did not complete: " + string(st.Status))
		}
		return err
	}()
	if err := errors.Join(err, a.close()); err != nil {
		t.Fatal(err)
	}
	return path, keyFile
}

// tamperPayload rewrites the payload of one event of a store file.
func tamperPayload(t *testing.T, path, id string, seq int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`UPDATE events SET payload = '{"tampered":true}' WHERE execution_id = ? AND sequence = ?`, id, seq)
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
}

// TestAuditVerifyCommand runs loom audit verify against a chained store,
// intact and then tampered with, as people and scripts would.
func TestAuditVerifyCommand(t *testing.T) {
	bin, _ := setup(t)
	path, keyFile := buildAuditFixture(t)

	out := mustLoom(t, bin, "audit", "verify", "--store", path, "--key-file", keyFile, "order-a", "order-b")
	for _, want := range []string{"✓ order-a:", "✓ order-b:", "chain intact (head hmac-sha256:"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify prints %q, want it to say %q", out, want)
		}
	}
	var rep auditReport
	if err := json.Unmarshal([]byte(mustLoom(t, bin, "audit", "verify", "--json", "--store", path, "--key-file", keyFile, "--all")), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Executions) != 2 || rep.Executions[0].Head == "" || rep.Executions[0].Sequence != nil {
		t.Fatalf("--all --json = %+v, want two intact logs with heads", rep)
	}

	// Another key, or none, fails every log at #0.
	stdout, _, code := loomRun(t, bin, "audit", "verify", "--store", path, "order-a")
	if code != exitCheckFailed || !strings.Contains(stdout, "tampered at #0 (wrong-key)") {
		t.Fatalf("verify without the key: exit %d, %q; want exit 3 naming #0 wrong-key", code, stdout)
	}

	tampered := copyStore(t, path)
	tamperPayload(t, tampered, "order-a", 2)
	stdout, stderr, code := loomRun(t, bin, "audit", "verify", "--store", tampered, "--key-file", keyFile, "--all")
	if code != exitCheckFailed || !strings.Contains(stdout, "✗ order-a: tampered at #2 (edited)") || !strings.Contains(stdout, "✓ order-b:") ||
		!strings.Contains(stderr, "1 of 2 log(s) fail") {
		t.Fatalf("verify of a tampered store: exit %d, stdout %q, stderr %q; want exit 3 naming order-a #2", code, stdout, stderr)
	}
	stdout, _, code = loomRun(t, bin, "audit", "verify", "--json", "--store", tampered, "--key-file", keyFile, "order-a")
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if v := rep.Executions[0]; code != exitCheckFailed || rep.OK || v.Sequence == nil || *v.Sequence != 2 || v.Reason != string(auditchain.ReasonEdited) {
		t.Fatalf("--json of a tampered log: exit %d, %+v", code, rep)
	}

	if _, _, code := loomRun(t, bin, "audit", "verify", "--store", path, "--key-file", keyFile, "no-such-order"); code != exitNotFound {
		t.Errorf("verify of an unknown execution exits %d, want %d", code, exitNotFound)
	}
	for _, args := range [][]string{{}, {"--all", "order-a"}} {
		if _, _, code := loomRun(t, bin, append([]string{"audit", "verify", "--store", path}, args...)...); code != exitUsage {
			t.Errorf("verify %v exits %d, want %d", args, code, exitUsage)
		}
	}
}

// TestAuditVerifyCompactedStore: after loom compact, verify checks the
// archived events in place — the same head as before — and names a
// tampered archived event.
func TestAuditVerifyCompactedStore(t *testing.T) {
	bin, _ := setup(t)
	path, keyFile := buildAuditFixture(t)
	var before, after auditReport
	if err := json.Unmarshal([]byte(mustLoom(t, bin, "audit", "verify", "--json", "--store", path, "--key-file", keyFile, "order-a")), &before); err != nil {
		t.Fatal(err)
	}
	mustLoom(t, bin, "compact", "--store", path, "order-a", "--through", "3")
	if err := json.Unmarshal([]byte(mustLoom(t, bin, "audit", "verify", "--json", "--store", path, "--key-file", keyFile, "order-a")), &after); err != nil {
		t.Fatal(err)
	}
	b, a := before.Executions[0], after.Executions[0]
	if !after.OK || a.Head != b.Head || a.Length != b.Length {
		t.Fatalf("verify after compact = %+v, before %+v: want the same intact chain", a, b)
	}
	// replay-check re-folds the whole history, the archived events in place.
	if out := mustLoom(t, bin, "replay-check", "--store", path, "order-a"); !strings.Contains(out, "matches byte for byte") {
		t.Fatalf("replay-check of the compacted log:\n%s", out)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`UPDATE archive SET payload = '{"tampered":true}' WHERE execution_id = 'order-a' AND sequence = 2`)
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := loomRun(t, bin, "audit", "verify", "--store", path, "--key-file", keyFile, "order-a")
	if code != exitCheckFailed || !strings.Contains(stdout, "✗ order-a: tampered at #2 (edited)") {
		t.Fatalf("verify of a tampered archive: exit %d, %q; want exit 3 naming #2 edited", code, stdout)
	}
}
