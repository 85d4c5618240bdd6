package store_test

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

func TestValidateReadModelApplyBatchCap(t *testing.T) {
	// Documents at the cap each, one byte over the batch cap together:
	// refused by their sizes, before any is parsed (they are not JSON).
	doc := json.RawMessage(strings.Repeat("x", store.MaxReadModelBytes))
	var writes []store.ReadModelWrite
	for i := range store.MaxReadModelBatchBytes / store.MaxReadModelBytes {
		writes = append(writes, store.ReadModelWrite{Row: store.ReadModel{Kind: "k", ID: string(rune('a' + i)), Doc: doc}})
	}
	// A delete's document does not count.
	writes = append(writes, store.ReadModelWrite{Row: store.ReadModel{Kind: "k", ID: "y", Doc: doc}, Delete: true})
	err := store.ValidateReadModelApply("p", "s", -1, 0, writes, event.Limits{})
	var ie *store.InvalidReadModelError
	if !errors.As(err, &ie) || ie.Field != "doc" || ie.Index != 0 {
		t.Fatalf("documents at the batch cap: %v, want the first refused as no JSON", err)
	}
	writes = append(writes, store.ReadModelWrite{Row: store.ReadModel{Kind: "k", ID: "z", Doc: json.RawMessage(`1`)}})
	err = store.ValidateReadModelApply("p", "s", -1, 0, writes, event.Limits{})
	var pe *event.PayloadTooLargeError
	if !errors.As(err, &ie) || ie.Field != "writes" || ie.Index != -1 || !errors.As(err, &pe) || pe.Limit != store.MaxReadModelBatchBytes {
		t.Fatalf("docs over the batch cap: %v", err)
	}
	// A store's own payload cap replaces MaxReadModelBytes.
	small := []store.ReadModelWrite{{Row: store.ReadModel{Kind: "k", ID: "a", Doc: json.RawMessage(`"12345"`)}}}
	if err := store.ValidateReadModelApply("p", "s", -1, 0, small, event.Limits{MaxPayloadBytes: 6}); !errors.As(err, &pe) || pe.Limit != 6 {
		t.Fatalf("a doc over a store's own cap: %v", err)
	}
}

func TestValidateReadModelApplyNamesTheDuplicate(t *testing.T) {
	w := func(kind, id string) store.ReadModelWrite {
		return store.ReadModelWrite{Row: store.ReadModel{Kind: kind, ID: id, Doc: json.RawMessage(`{}`)}}
	}
	// The same id in two kinds is two rows; the same key twice is refused
	// at its first write.
	err := store.ValidateReadModelApply("p", "s", -1, 0, []store.ReadModelWrite{w("a", "x"), w("b", "y"), w("b", "x"), w("b", "y")}, event.Limits{})
	var ie *store.InvalidReadModelError
	if !errors.As(err, &ie) || ie.Index != 1 || ie.Field != "id" {
		t.Fatalf("a duplicate key: %v", err)
	}
}

func TestSortReadModelWrites(t *testing.T) {
	w := func(kind, id string) store.ReadModelWrite {
		return store.ReadModelWrite{Row: store.ReadModel{Kind: kind, ID: id}}
	}
	in := []store.ReadModelWrite{w("b", "a"), w("a", "😀"), w("a", "\uFFFD"), w("a", "Z"), w("a", "a")}
	got := store.SortReadModelWrites(in)
	want := []string{"a/Z", "a/a", "a/\uFFFD", "a/😀", "b/a"}
	for i, g := range got {
		if g.Row.Kind+"/"+g.Row.ID != want[i] {
			t.Fatalf("SortReadModelWrites = %v, want %q", got, want)
		}
	}
	if in[0].Row.Kind != "b" {
		t.Fatal("SortReadModelWrites sorted its argument in place")
	}
}

func TestReadModelFieldsRoundTrip(t *testing.T) {
	for _, fields := range []map[string]string{nil, {}, {"b": "<&>", "a": "é\t\"", "": "x"}} {
		text := store.ReadModelFieldsJSON(fields)
		back, err := store.ParseReadModelFields(text)
		if err != nil || !maps.Equal(back, fields) {
			t.Fatalf("%v encoded as %s decoded as %v, %v", fields, text, back, err)
		}
	}
	if got := store.ReadModelFieldsJSON(map[string]string{"z": "1", "a": "2"}); got != `{"a":"2","z":"1"}` {
		t.Fatalf("fields encode as %s, keys not sorted", got)
	}
}

func TestCheckReadModelWrite(t *testing.T) {
	w := store.ReadModelWrite{Row: store.ReadModel{Kind: "k", ID: "a"}, ExpectVersion: 2}
	cases := []struct {
		owner   string
		version int64
		want    error
	}{
		{"p", 2, nil},
		{"q", 2, store.ErrReadModelOwned},
		{"q", 5, store.ErrReadModelOwned}, // the owner is named first
		{"p", 3, store.ErrReadModelVersionConflict},
		{"", 0, store.ErrReadModelVersionConflict},
	}
	for _, c := range cases {
		if err := store.CheckReadModelWrite("p", w, c.owner, c.version); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("owner %q version %d: %v, want %v", c.owner, c.version, err, c.want)
		}
	}
}

func TestReadModelPageLimit(t *testing.T) {
	for in, want := range map[int]int{ //loom:order-independent independent cases
		-1: store.DefaultReadModelQueryLimit, 0: store.DefaultReadModelQueryLimit, 1: 1,
		store.MaxReadModelQueryLimit: store.MaxReadModelQueryLimit, store.MaxReadModelQueryLimit + 1: store.MaxReadModelQueryLimit,
	} {
		if got := store.ReadModelPageLimit(in); got != want {
			t.Errorf("ReadModelPageLimit(%d) = %d, want %d", in, got, want)
		}
	}
}
