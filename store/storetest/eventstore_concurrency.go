package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Sizes of the concurrency subtests.
const (
	concurrentExecutions = 32 // appenders on distinct executions
	appendsPerExecution  = 50 // single-event batches each
	raceContenders       = 16 // appenders racing on one expected sequence
	raceRounds           = 8
)

// concurrentDistinct: 32 goroutines each append 50 single-event batches to
// their own execution at once; every log ends complete and contiguous, and
// the listing shows each execution with its length.
func (k eventKit) concurrentDistinct(t *testing.T) {
	s := k.open(t)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range concurrentExecutions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exec := fmt.Sprintf("exec-c%02d", w)
			<-start
			for seq := range int64(appendsPerExecution) {
				if err := s.Append(context.Background(), exec, seq, []event.Envelope{envelopeAt(exec, seq)}); err != nil {
					t.Errorf("Append(%q, %d): %v", exec, seq, err)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	var ids []string
	for w := range concurrentExecutions {
		exec := fmt.Sprintf("exec-c%02d", w)
		ids = append(ids, exec)
		assertLog(t, s, exec, batchAt(exec, 0, appendsPerExecution))
	}
	infos := listAll(t, s, "", 10)
	if len(infos) != concurrentExecutions {
		t.Fatalf("listing holds %d executions, want %d", len(infos), concurrentExecutions)
	}
	for i, info := range infos {
		if info.ExecutionID != ids[i] || info.Length != appendsPerExecution {
			t.Fatalf("listing[%d] = %+v, want %q with length %d", i, info, ids[i], appendsPerExecution)
		}
	}
}

// concurrentSameSequence: in each round, 16 goroutines append a batch to
// the same execution at the same expected sequence. Exactly one wins; every
// other gets *store.SequenceConflictError; the log holds the winner's batch
// and nothing of the losers'.
func (k eventKit) concurrentSameSequence(t *testing.T) {
	s := k.open(t)
	const exec = "exec-race"
	var want []event.Envelope
	for round := range raceRounds {
		expected := int64(len(want))
		size := 1 + round%3
		batches := make([][]event.Envelope, raceContenders)
		for c := range batches {
			batches[c] = batchAt(exec, expected, size)
			for i := range batches[c] {
				batches[c][i].ID = fmt.Sprintf("r%d-c%d-%d", round, c, i)
			}
		}
		errs := make([]error, raceContenders)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range raceContenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[c] = s.Append(context.Background(), exec, expected, batches[c])
			}()
		}
		close(start)
		wg.Wait()

		winner := -1
		for c, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: contenders %d and %d both appended at sequence %d", round, winner, c, expected)
			case err == nil:
				winner = c
			case !errors.Is(err, store.ErrSequenceConflict):
				t.Fatalf("round %d: contender %d: %v, want store.ErrSequenceConflict", round, c, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no contender appended at sequence %d", round, expected)
		}
		for c, err := range errs {
			var ce *store.SequenceConflictError
			if c != winner && (!errors.As(err, &ce) || ce.Expected != expected || ce.Actual != expected+int64(size)) {
				t.Fatalf("round %d: contender %d: %v, want a SequenceConflictError expecting %d at %d",
					round, c, err, expected, expected+int64(size))
			}
		}
		want = append(want, batches[winner]...)
		assertLog(t, s, exec, want)
	}
}
