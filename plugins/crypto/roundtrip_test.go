package crypto_test

import (
	"context"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/store/memstore"
)

var roundTripSeed = flag.Uint64("crypto.seed", 0, "replay one seed of TestSealingRoundTripsRandomPayloads")

// TestSealingRoundTripsRandomPayloads seals random object payloads — any
// member may be sealed, values of every JSON kind, odd whitespace,
// escaped and duplicate keys — and checks they read back byte for byte.
// A failure prints its seed; -crypto.seed=N replays it alone.
func TestSealingRoundTripsRandomPayloads(t *testing.T) {
	seeds := []uint64{*roundTripSeed}
	if *roundTripSeed == 0 {
		seeds = seeds[:0]
		for i := uint64(1); i <= 64; i++ {
			seeds = append(seeds, i)
		}
	}
	fields := crypto.FieldTable{ByType: map[string][]string{"T": {"a", "b", `q"k`, "é"}}}
	for _, seed := range seeds {
		r := rand.New(rand.NewPCG(seed, seed))
		s := wrapEvents(t, memstore.NewEventStore(), openKeys(t, t.TempDir()),
			crypto.EventStoreOptions{Subject: crypto.FixedSubject("s"), Fields: &fields})
		var log []event.Envelope
		for seq := range int64(8) {
			log = append(log, event.Envelope{ID: "e" + strconv.FormatInt(seq, 10), ExecutionID: "x", Type: "T",
				Sequence: seq, Payload: json.RawMessage(randomObject(r))})
		}
		ctx := context.Background()
		if err := s.Append(ctx, "x", 0, log); err != nil {
			t.Fatalf("seed %d: Append: %v", seed, err)
		}
		got, err := s.ReadFrom(ctx, "x", 0)
		if err != nil || !reflect.DeepEqual(got, log) {
			t.Fatalf("seed %d: read back %v, %v\nwant %v", seed, got, err, log)
		}
	}
}

func randomObject(r *rand.Rand) string {
	keys := []string{"a", "b", `q\"k`, `\u00e9`, "c", "stepId"}
	ws := func() string { return []string{"", " ", "\n\t", "  "}[r.IntN(4)] }
	var b strings.Builder
	b.WriteString(ws() + "{")
	for i := range r.IntN(6) {
		if i > 0 {
			b.WriteString(ws() + ",")
		}
		b.WriteString(ws() + `"` + keys[r.IntN(len(keys))] + `"` + ws() + ":" + ws() + randomValue(r, 3))
	}
	b.WriteString(ws() + "}" + ws())
	return b.String()
}

func randomValue(r *rand.Rand, depth int) string {
	n := 7
	if depth == 0 {
		n = 5
	}
	switch r.IntN(n) {
	case 0:
		return "null"
	case 1:
		return []string{"true", "false"}[r.IntN(2)]
	case 2:
		return []string{"0", "-1.50", "1E+2", "12345678901234567890"}[r.IntN(4)]
	case 3:
		return `"s\"}]` + strconv.Itoa(r.IntN(100)) + `"`
	case 4:
		return `"é日本"`
	case 5:
		return "[" + randomValue(r, depth-1) + " , " + randomValue(r, depth-1) + "]"
	default:
		return `{"k":` + randomValue(r, depth-1) + `,"}":"]"}`
	}
}
