package crypto_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", to read the raw rows
)

// secret marks every plaintext value the flows record; the raw database
// must never hold it.
const secret = "TOPSECRET"

type doc = map[string]any

// kycFlows are flows whose values are all maps, so a replay over shredded
// markers still decodes them.
func kycFlows() []*loom.Flow {
	fetch := loom.NewStep("fetch", func(ctx context.Context, in doc) (doc, error) {
		return doc{"record": secret + "-step-output", "of": in["user"]}, nil
	})
	finish := loom.NewStep("finish", func(ctx context.Context, in doc) (doc, error) {
		return doc{"done": secret + "-finish", "in": in}, nil
	})
	kyc := loom.NewFlow("kyc", func(c *loom.Context, in doc) (doc, error) {
		rec, err := loom.Run(c, fetch, in)
		if err != nil {
			return nil, err
		}
		route, err := loom.Decide(c, "route", func() (doc, error) { return doc{"r": secret + "-decision"}, nil })
		if err != nil {
			return nil, err
		}
		ans, err := loom.Suspend[doc](c, "approve")
		if err != nil {
			return nil, err
		}
		if err := c.Emit("kyc.approved", doc{"note": secret + "-emit"}); err != nil {
			return nil, err
		}
		out, err := loom.Run(c, finish, doc{"rec": rec, "route": route})
		if err != nil {
			return nil, err
		}
		return doc{"out": out, "answer": ans}, nil
	})
	mail := loom.NewFlow("mail", func(c *loom.Context, in doc) (doc, error) {
		return loom.Receive[doc](c, "docs")
	})
	return []*loom.Flow{kyc, mail}
}

// sealedSQLite is a runtime's storage: one SQLite file, its event,
// snapshot and content stores wrapped, over one file keystore.
type sealedSQLite struct {
	dir    string
	keys   *crypto.FileKeyStore
	raw    sqlite.Stores
	events *crypto.EventStore
	set    store.Set
}

func openSealedSQLite(t *testing.T, dir string) *sealedSQLite {
	t.Helper()
	return openSealedSQLiteIndexed(t, dir, nil)
}

// openSealedSQLiteIndexed is openSealedSQLite with a SubjectIndex (nil:
// none).
func openSealedSQLiteIndexed(t *testing.T, dir string, index crypto.SubjectIndex) *sealedSQLite {
	t.Helper()
	raw, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(dir, "loom.db")})
	if err != nil {
		t.Fatal(err)
	}
	keys := openKeys(t, dir)
	events := wrapEvents(t, raw.Events, keys, crypto.EventStoreOptions{Subject: crypto.SubjectFromInput("user"), Index: index})
	snaps, err := crypto.NewSnapshotStore(raw.Snapshots, keys, events, nil)
	if err != nil {
		t.Fatal(err)
	}
	content, err := crypto.NewContentStore(raw.Content, keys, crypto.ContentStoreOptions{IndexPath: filepath.Join(dir, "content.index")})
	if err != nil {
		t.Fatal(err)
	}
	s := &sealedSQLite{dir: dir, keys: keys, raw: raw, events: events}
	s.set = store.Set{Events: events, Snapshots: snaps, Branches: raw.Branches, Timers: raw.Timers,
		Leases: raw.Leases, Content: content, Queues: raw.Queues}
	t.Cleanup(func() { _ = raw.Close() }) // closed again after a test's own Close: returns the first result
	return s
}

func newRuntime(t *testing.T, s *sealedSQLite) *loom.Runtime {
	t.Helper()
	rt, err := loom.New(loom.Config{Storage: s.set, Flows: kycFlows(), Features: loom.Features{Inbox: true},
		Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// runKYC drives one kyc execution to completion and parks another, and
// delivers one message to a mail execution; it returns their ids.
func runKYC(t *testing.T, rt *loom.Runtime) (done, parked, mail string) {
	t.Helper()
	ctx := context.Background()
	in := doc{"user": "user-7", "ssn": secret + "-input"}
	done, err := rt.Start(ctx, "kyc", in, loom.WithExecutionID("kyc-done"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, done); err != nil {
		t.Fatal(err)
	}
	answer := json.RawMessage(`{"approvedBy":"` + secret + `-resume"}`)
	if err := rt.Resume(ctx, done, loom.ResumeEvent{EventType: "approve", Payload: answer}); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, done)
	if err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("kyc-done: %v, %v", res.Status, err)
	}
	if !bytes.Contains(res.Output, []byte(secret+"-finish")) || !bytes.Contains(res.Output, []byte(secret+"-resume")) {
		t.Fatalf("output %s does not hold the step's and the answer's values", res.Output)
	}
	parked, err = rt.Start(ctx, "kyc", in, loom.WithExecutionID("kyc-parked"))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := rt.WaitForSuspend(ctx, parked); err != nil || st.Variables.SuspendedOn.On != "approve" {
		t.Fatalf("kyc-parked: %v", err)
	}
	mail, err = rt.Start(ctx, "mail", doc{"user": "user-7"}, loom.WithExecutionID("mail-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Send(ctx, mail, "docs", doc{"body": secret + "-message"}); err != nil {
		t.Fatal(err)
	}
	res, err = rt.WaitForCompletion(ctx, mail)
	if err != nil || !bytes.Contains(res.Output, []byte(secret+"-message")) {
		t.Fatalf("mail-1: %s, %v", res.Output, err)
	}
	return done, parked, mail
}

// rawRows returns every stored payload, metadata, snapshot state and
// content blob of the SQLite file, read with database/sql behind the
// stores.
func rawRows(t *testing.T, path string) (rows []string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, q := range []string{
		"SELECT payload || ' ' || coalesce(metadata, '') FROM events",
		"SELECT CAST(state AS BLOB) FROM snapshots",
		"SELECT data FROM content",
	} {
		r, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for r.Next() {
			var b []byte
			if err := r.Scan(&b); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, string(b))
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

func TestRuntimeOverSealedSQLiteStoresNoPlaintext(t *testing.T) {
	s := openSealedSQLite(t, t.TempDir())
	rt := newRuntime(t, s)
	runKYC(t, rt)
	rows := rawRows(t, filepath.Join(s.dir, "loom.db"))
	var sealed, snapshots int
	for _, r := range rows {
		if strings.Contains(r, secret) {
			t.Fatalf("a raw row holds plaintext: %.200s", r)
		}
		if strings.Contains(r, "loom:sealed:v1:") {
			sealed++
		}
		if strings.HasPrefix(r, "\x00loom-sealed-snapshot/1") {
			snapshots++
		}
	}
	if sealed == 0 || snapshots == 0 {
		t.Fatalf("%d sealed rows and %d sealed snapshots in %d rows: want some of each", sealed, snapshots, len(rows))
	}
	// The frame stays readable.
	if !slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, `"stepId":"fetch"`) }) {
		t.Fatal("no raw row shows the step id: the frame must stay readable")
	}
	// And the whole files on disk (database, WAL) hold no plaintext either.
	files, _ := filepath.Glob(filepath.Join(s.dir, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("%s holds plaintext", filepath.Base(f))
		}
	}
}

func TestEraseSubjectLeavesExecutionsLoadableAndReplayable(t *testing.T) {
	s := openSealedSQLite(t, t.TempDir())
	rt := newRuntime(t, s)
	done, parked, mail := runKYC(t, rt)
	ctx := context.Background()

	erasure, err := s.events.EraseSubject(ctx, "user-7")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{done, parked, mail}; !slices.Equal(erasure.Executions, want) {
		t.Fatalf("erasure executions = %v, want %v", erasure.Executions, want)
	}
	p := erasure.Proof
	if p.Subject != "user-7" || p.KeyID == "" || p.DestroyedAt != fixedClock().UnixMilli() || p.Digest == "" {
		t.Fatalf("proof %+v", p)
	}
	if err := s.keys.VerifyProof(ctx, p); err != nil {
		t.Fatalf("VerifyProof: %v", err)
	}
	forged := p
	forged.KeyID = "0000"
	if err := s.keys.VerifyProof(ctx, forged); !errors.Is(err, crypto.ErrProofInvalid) {
		t.Fatalf("VerifyProof(forged) = %v, want ErrProofInvalid", err)
	}

	// A restarted runtime over the same files: snapshots of the subject
	// read as none, the log folds with markers.
	rt2 := newRuntime(t, s)
	for _, id := range []string{done, parked, mail} {
		st, err := rt2.LoadState(ctx, id)
		if err != nil {
			t.Fatalf("LoadState(%s) after erasure: %v", id, err)
		}
		if _, ok := crypto.IsShredded(st.Variables.Input); !ok {
			t.Fatalf("%s: _input = %s, want a shredded marker", id, st.Variables.Input)
		}
		log, err := store.Read(ctx, s.events, id)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		if got := fold.Fold(log); got.Status != st.Status {
			t.Fatalf("%s: fold.Fold status %s, LoadState %s", id, got.Status, st.Status)
		}
		for _, e := range log {
			if bytes.Contains(e.Payload, []byte(secret)) {
				t.Fatalf("%s #%d still reads plaintext after erasure", id, e.Sequence)
			}
		}
	}
	st, _ := rt2.LoadState(ctx, done)
	if st.Status != fold.StatusCompleted {
		t.Fatalf("kyc-done status %s", st.Status)
	}
	if m, ok := crypto.IsShredded(st.Variables.Output); !ok || m.Subject != "user-7" || m.KeyID != p.KeyID {
		t.Fatalf("_output = %s, want the marker of user-7's key", st.Variables.Output)
	}

	// A replay of the parked execution still serves its log to the gate.
	log, err := store.Read(ctx, s.events, parked)
	if err != nil {
		t.Fatal(err)
	}
	if rep := rt2.CheckReplay(ctx, log); !rep.Compatible() {
		t.Fatalf("CheckReplay of the shredded parked execution: %s", rep)
	}
	// A recovery pass and the listing work over the shredded logs.
	if _, err := rt2.Recover(ctx); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	page, err := s.events.ListExecutions(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(page.Executions, func(i store.ExecutionInfo) bool { return i.ExecutionID == parked && i.WorkflowID == "kyc" }) {
		t.Fatalf("listing %+v lacks the parked execution", page.Executions)
	}

	// No new data is sealed under an erased subject: a resume is refused,
	// typed, writing nothing; a cancel (frame only) is recorded.
	before := len(log)
	err = rt2.Resume(ctx, parked, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"x":1}`)})
	if !errors.Is(err, crypto.ErrKeyDestroyed) {
		t.Fatalf("Resume of a shredded execution = %v, want ErrKeyDestroyed", err)
	}
	if now, _ := store.Read(ctx, s.events, parked); len(now) != before {
		t.Fatalf("the refused resume wrote %d events", len(now)-before)
	}
	if err := rt2.Cancel(ctx, parked, "subject erased"); err != nil {
		t.Fatalf("Cancel of a shredded execution: %v", err)
	}
	if st, err := rt2.LoadState(ctx, parked); err != nil || st.Status != fold.StatusCancelled {
		t.Fatalf("after Cancel: %v, %v", st.Status, err)
	}
}

func TestCorruptedRowIsSealErrorNotMarker(t *testing.T) {
	dir := t.TempDir()
	s := openSealedSQLite(t, dir)
	rt := newRuntime(t, s)
	done, _, _ := runKYC(t, rt)
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.raw.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "loom.db"))
	if err != nil {
		t.Fatal(err)
	}
	var payload string
	if err := db.QueryRow("SELECT payload FROM events WHERE execution_id = ? AND event_type = 'STEP_COMPLETED' ORDER BY sequence LIMIT 1", done).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	at := strings.Index(payload, "loom:sealed:v1:") + len("loom:sealed:v1:") + 20
	flipped := payload[:at] + string(payload[at]^1) + payload[at+1:]
	if _, err := db.Exec("UPDATE events SET payload = ? WHERE execution_id = ? AND payload = ?", flipped, done, payload); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openSealedSQLite(t, dir)
	_, err = store.Read(context.Background(), s2.events, done)
	var se *crypto.SealError
	if !errors.As(err, &se) || se.ExecutionID != done || se.EventType != "STEP_COMPLETED" || se.Field != "output" {
		t.Fatalf("read of a corrupted row = %v, want *SealError on STEP_COMPLETED.output", err)
	}
	// LoadState folds the log once no snapshot covers the corrupted event.
	if err := s2.set.Snapshots.(*crypto.SnapshotStore).DeleteExecution(context.Background(), done); err != nil {
		t.Fatal(err)
	}
	if _, err := newRuntime(t, s2).LoadState(context.Background(), done); !errors.As(err, &se) {
		t.Fatalf("LoadState over a corrupted row = %v, want *SealError", err)
	}
}
