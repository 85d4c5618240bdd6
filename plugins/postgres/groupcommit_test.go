package postgres

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loom-kernel/loom/internal/groupcommit/writertest"
)

// holdWriter takes every leadership of the writer, so a test can queue
// appends, then hand back all but one: the next leader takes them as one
// group.
func holdWriter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	for range maxLeaders {
		db.w.token <- struct{}{}
	}
	var once sync.Once
	release = func() { once.Do(func() { <-db.w.token }) }
	t.Cleanup(func() {
		release()
		for range maxLeaders - 1 {
			<-db.w.token
		}
	})
	return release
}

// The group-commit kit, on the PostgreSQL writer: held by taking every
// leadership; a CHECK constraint poisons rows; a refusal the log accepts
// by the time it is judged is rechecked.
func TestGroupCommitKit(t *testing.T) {
	writertest.Run(t, func(t *testing.T) writertest.Writer {
		db := openTestDB(t)
		return writertest.Writer{
			Store:  db.EventStore(),
			Stats:  kitStats(db),
			Hold:   func(t *testing.T) func() { return holdWriter(t, db) },
			Queued: func() int { return len(db.w.queue) },
			Poison: func(t *testing.T) {
				adminExec(t, `ALTER TABLE `+quoted(db.Schema())+`.events ADD CONSTRAINT poison CHECK (event_type <> 'POISON')`)
			},
			IsPoisonError: func(err error) bool {
				var pgErr *pgconn.PgError
				return errors.As(err, &pgErr) && strings.Contains(pgErr.ConstraintName, "poison") && !errors.Is(err, ErrOutcomeUnknown)
			},
			Rechecks: true,
		}
	})
}

// notCommitted decides whether a failed group may be retried batch by
// batch: only when the server rolled it back for sure.
func TestNotCommittedClassification(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"statement error", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23514"}, true},
		{"wrapped statement error", fmt.Errorf("x: %w", &pgconn.PgError{SeverityUnlocalized: "ERROR"}), true},
		{"localized severity only", &pgconn.PgError{Severity: "ERROR"}, true},
		{"server ended the session", &pgconn.PgError{SeverityUnlocalized: "FATAL", Code: "57P01"}, false},
		{"panic", &pgconn.PgError{SeverityUnlocalized: "PANIC"}, false},
		{"broken connection", errors.New("read tcp: connection reset by peer"), false},
	}
	for _, c := range cases {
		if got := notCommitted(c.err); got != c.want {
			t.Errorf("%s: notCommitted = %v, want %v", c.name, got, c.want)
		}
	}
}

// kitStats reads db's write counters for the group-commit kit.
func kitStats(db *DB) func() writertest.Stats {
	return func() writertest.Stats {
		st := db.WriteStats()
		return writertest.Stats{Transactions: st.Transactions, Batches: st.Batches, Events: st.Events}
	}
}
