package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// listingSize is the number of executions ListPaging creates.
const listingSize = 3000

// listingSpecialIDs are ids whose order tells code-point (UTF-8 byte) order
// apart from UTF-16 and from case-folding or locale collations:
// "Z" < "exec-" < "exec-0" < "exec-00000" < "z" < "é" < "日本" < "｡" < "😀"
// (in UTF-16, "😀" would sort before "｡").
var listingSpecialIDs = []string{"é", "z", "Z", "日本", "\uff61", "😀", "exec-", "exec-0"}

// listingWant is the expected order of the special ids, spelled out rather
// than computed, so the kit does not share a bug with the store.
var listingWant = []string{"Z", "exec-", "exec-0", "z", "é", "日本", "\uff61", "😀"}

// listEmpty: an empty store lists nothing, with Next "".
func (k eventKit) listEmpty(t *testing.T) {
	s := k.open(t)
	page, err := s.ListExecutions(context.Background(), "", 10)
	if err != nil {
		t.Fatalf("ListExecutions: %v", err)
	}
	if len(page.Executions) != 0 || page.Next != "" {
		t.Fatalf("empty store listed %+v", page)
	}
}

// listPaging: 3,000 executions page back exactly once each in code-point
// order, with their workflow id and length, at several page sizes and from
// several cursors; Next is "" on the page holding the last id.
func (k eventKit) listPaging(t *testing.T) {
	s := k.open(t)
	ids := slices.Clone(listingSpecialIDs)
	for i := 0; len(ids) < listingSize; i++ {
		ids = append(ids, fmt.Sprintf("exec-%05d", i))
	}
	lengths := make(map[string]int64, len(ids))
	for i, id := range ids {
		lengths[id] = 1
		if i%97 == 0 {
			lengths[id] = 3
		}
	}
	k.createExecutions(t, s, ids, lengths)

	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	var special []string
	for _, id := range sorted {
		if slices.Contains(listingSpecialIDs, id) {
			special = append(special, id)
		}
	}
	if !slices.Equal(special, listingWant) {
		t.Fatalf("storetest: fixture order %q, want %q", special, listingWant)
	}

	for _, pageSize := range []int{7, 100, listingSize, listingSize + 1} {
		infos := listAll(t, s, "", pageSize)
		assertInfos(t, fmt.Sprintf("page size %d", pageSize), infos, sorted, lengths)
	}
	for _, after := range []string{sorted[1499], sorted[1499] + " ", "exec-", "zz", "\uff61"} {
		i, _ := slices.BinarySearch(sorted, after)
		for i < len(sorted) && sorted[i] <= after {
			i++
		}
		infos := listAll(t, s, after, 13)
		assertInfos(t, fmt.Sprintf("after %q", after), infos, sorted[i:], lengths)
	}
	page, err := s.ListExecutions(context.Background(), sorted[len(sorted)-1], 10)
	if err != nil || len(page.Executions) != 0 || page.Next != "" {
		t.Fatalf("ListExecutions(after the last id) = %+v, %v; want an empty last page", page, err)
	}
}

// createExecutions appends lengths[id] events to each id, from 16 workers so
// a store that groups concurrent commits can do so.
func (k eventKit) createExecutions(t *testing.T, s store.EventStore, ids []string, lengths map[string]int64) {
	t.Helper()
	work := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				evs := batchAt(id, 0, int(lengths[id]))
				for i := range evs {
					evs[i].WorkflowID = "wf-" + id
				}
				if err := s.Append(context.Background(), id, 0, evs); err != nil {
					t.Errorf("Append(%q): %v", id, err)
				}
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// assertInfos checks a full listing against the expected ids, in order,
// with each execution's workflow id and length.
func assertInfos(t *testing.T, what string, infos []store.ExecutionInfo, want []string, lengths map[string]int64) {
	t.Helper()
	if len(infos) != len(want) {
		t.Fatalf("%s: listed %d executions, want %d", what, len(infos), len(want))
	}
	for i, info := range infos {
		if info.ExecutionID != want[i] {
			t.Fatalf("%s: listing[%d] = %q, want %q", what, i, info.ExecutionID, want[i])
		}
		if info.WorkflowID != "wf-"+want[i] || info.Length != lengths[want[i]] {
			t.Fatalf("%s: listing[%d] = %+v, want workflow %q and length %d",
				what, i, info, "wf-"+want[i], lengths[want[i]])
		}
	}
}
