package auditchain_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // the driver the tests tamper with a store file through

	"github.com/loom-kernel/loom/plugins/auditchain"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// The tamper tests write real logs through a chained runtime, then change
// rows of the events table behind the store's back, as someone with access
// to the database would, and check that Verify names exactly the tampered
// sequence and why.

// tamperAt is the sequence the cases tamper with: inside the log, with
// events after it.
const tamperAt = 3

// compactThrough is where the compacted variants compact every log, so
// the cases at tamperAt and tamperAt+1 tamper with archived events.
const compactThrough = tamperAt + 2

// dialect renders the statements of one database.
type dialect struct {
	// table is the events table's name, archive the archive's; arg(n) the
	// n-th placeholder.
	table, archive string
	arg            func(n int) string
	// timestamp is the events table's timestamp column.
	timestamp string
	// dropMember removes the chain member from the metadata column.
	dropMember string
	// exec runs one statement.
	exec func(ctx context.Context, query string, args ...any) error
}

// tamperCase is one way to tamper with a log, and the verdict it must get.
type tamperCase struct {
	name   string
	stmts  func(d dialect) []string
	seq    int64
	reason auditchain.Reason
}

func tamperCases() []tamperCase {
	where := func(d dialect, seq string) string {
		return fmt.Sprintf("execution_id = %s AND sequence %s", d.arg(1), seq)
	}
	at := func(n int) string { return fmt.Sprintf("= %d", n) }
	return []tamperCase{
		{name: "edit", seq: tamperAt, reason: auditchain.ReasonEdited, stmts: func(d dialect) []string {
			return []string{fmt.Sprintf(`UPDATE %s SET payload = '{"tampered":true}' WHERE %s`, d.table, where(d, at(tamperAt)))}
		}},
		{name: "edit-first", seq: 0, reason: auditchain.ReasonEdited, stmts: func(d dialect) []string {
			return []string{fmt.Sprintf(`UPDATE %s SET %s = %s + 1 WHERE %s`, d.table, d.timestamp, d.timestamp, where(d, at(0)))}
		}},
		{name: "delete", seq: tamperAt, reason: auditchain.ReasonDeleted, stmts: func(d dialect) []string {
			return []string{fmt.Sprintf(`DELETE FROM %s WHERE %s`, d.table, where(d, at(tamperAt)))}
		}},
		{name: "delete-renumber", seq: tamperAt, reason: auditchain.ReasonDeleted, stmts: func(d dialect) []string {
			return []string{
				fmt.Sprintf(`DELETE FROM %s WHERE %s`, d.table, where(d, at(tamperAt))),
				fmt.Sprintf(`UPDATE %s SET sequence = sequence + 999999 WHERE %s`, d.table, where(d, fmt.Sprintf("> %d", tamperAt))),
				fmt.Sprintf(`UPDATE %s SET sequence = sequence - 1000000 WHERE %s`, d.table, where(d, ">= 1000000")),
			}
		}},
		{name: "reorder", seq: tamperAt, reason: auditchain.ReasonReordered, stmts: func(d dialect) []string {
			return []string{
				fmt.Sprintf(`UPDATE %s SET sequence = -1 WHERE %s`, d.table, where(d, at(tamperAt))),
				fmt.Sprintf(`UPDATE %s SET sequence = %d WHERE %s`, d.table, tamperAt, where(d, at(tamperAt+1))),
				fmt.Sprintf(`UPDATE %s SET sequence = %d WHERE %s`, d.table, tamperAt+1, where(d, "= -1")),
			}
		}},
		{name: "unchain", seq: tamperAt, reason: auditchain.ReasonUnchained, stmts: func(d dialect) []string {
			return []string{fmt.Sprintf(`UPDATE %s SET metadata = %s WHERE %s`, d.table, d.dropMember, where(d, at(tamperAt)))}
		}},
	}
}

// runTamperCases completes one execution per case on a, closes it, tampers
// with each through d, then verifies every execution with verify: each
// tampered one fails at its case's sequence for its case's reason, the
// untouched one still verifies, and another key fails at sequence 0. With
// compacted, every log is first compacted through compactThrough, and a
// case inside that range tampers with the archive's rows instead: the
// archived history verifies in place, as the log would.
func runTamperCases(t *testing.T, a *auditedApp, d dialect, compacted bool,
	verify func(id string, opts auditchain.Options) auditchain.Result) {
	cases := tamperCases()
	for _, c := range cases {
		a.complete(t, c.name)
	}
	a.complete(t, "untouched")
	if compacted {
		for _, c := range append(cases, tamperCase{name: "untouched"}) {
			if res, err := a.rt.Compact(testContext(t), c.name, compactThrough); err != nil || res.Archived != compactThrough {
				t.Fatalf("%s: Compact = %+v, %v; want %d events archived", c.name, res, err, compactThrough)
			}
		}
	}
	a.close(t)
	ctx := testContext(t)
	for _, c := range cases {
		d := d
		if compacted && c.seq >= 1 && c.seq <= compactThrough {
			d.table = d.archive
		}
		for _, q := range c.stmts(d) {
			if err := d.exec(ctx, q, c.name); err != nil {
				t.Fatalf("%s: %s: %v", c.name, q, err)
			}
		}
	}
	opts := auditchain.Options{Key: testKey}
	for _, c := range cases {
		r := verify(c.name, opts)
		if r.OK || r.Sequence != c.seq || r.Reason != c.reason {
			t.Errorf("%s: Verify = %+v, want a failure at #%d for %q", c.name, r, c.seq, c.reason)
		}
	}
	if r := verify("untouched", opts); !r.OK || r.Head == "" {
		t.Errorf("untouched: Verify = %+v, want OK with a head", r)
	}
	other := auditchain.Options{Key: []byte("another-key-of-thirty-two-bytes!")}
	if r := verify("untouched", other); r.OK || r.Sequence != 0 || r.Reason != auditchain.ReasonWrongKey {
		t.Errorf("untouched under another key: Verify = %+v, want a failure at #0 for %q", r, auditchain.ReasonWrongKey)
	}
	if r := verify("untouched", auditchain.Options{}); r.OK || r.Sequence != 0 || r.Reason != auditchain.ReasonWrongKey {
		t.Errorf("untouched without a key: Verify = %+v, want a failure at #0 for %q", r, auditchain.ReasonWrongKey)
	}
}

// TestChainTamperSQLite tampers with rows of a SQLite file directly, in
// the log and (compacted) in the archive.
func TestChainTamperSQLite(t *testing.T) {
	for name, compacted := range map[string]bool{"Log": false, "Compacted": true} {
		t.Run(name, func(t *testing.T) { tamperSQLite(t, compacted) })
	}
}

func tamperSQLite(t *testing.T, compacted bool) {
	path := filepath.Join(t.TempDir(), "audit.db")
	a := openAuditedApp(t, path, auditchain.Options{Key: testKey})
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()
	d := dialect{
		table:      "events",
		archive:    "archive",
		timestamp:  "timestamp",
		arg:        func(int) string { return "?" },
		dropMember: `json_remove(metadata, '$.` + auditchain.MetadataKey + `')`,
		exec: func(ctx context.Context, q string, args ...any) error {
			_, err := db.ExecContext(ctx, q, args...)
			return err
		},
	}
	runTamperCases(t, a, d, compacted, func(id string, opts auditchain.Options) auditchain.Result {
		ro, err := sqlite.OpenReadOnly(path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := ro.Close(); err != nil {
				t.Error(err)
			}
		}()
		opts.Archive = ro.ArchiveStore()
		return verifyIn(t, ro.EventStore(), id, opts)
	})
}

func verifyIn(t *testing.T, events store.EventStore, id string, opts auditchain.Options) auditchain.Result {
	t.Helper()
	r, err := auditchain.VerifyExecution(testContext(t), events, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Length == 0 {
		t.Fatalf("%s: no events", id)
	}
	return r
}
