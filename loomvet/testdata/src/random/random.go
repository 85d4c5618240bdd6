// Package random holds the cases of the random check.
package random

import (
	crand "crypto/rand"
	"math/rand"
	mrand "math/rand/v2"

	"github.com/loom-kernel/loom"
)

var Random = loom.NewFlow("random", func(ctx *loom.Context, n int) (int, error) {
	a := rand.Intn(n)                   // want `math/rand.Intn in flow code draws from a generator the log does not record.*: use loom.Random\(ctx\)`
	b := mrand.IntN(n)                  // want `math/rand/v2.IntN in flow code .*loom.Random\(ctx\)`
	mrand.Shuffle(n, func(i, j int) {}) // want `math/rand/v2.Shuffle in flow code`
	var buf [8]byte
	_, _ = crand.Read(buf[:]) // want `crypto/rand.Read in flow code draws bytes a replay cannot draw again: use loom.Random\(ctx\), or make the value in a step`
	_ = crand.Reader          // want `crypto/rand.Reader in flow code`

	// The recorded generator, a generator from a fixed seed, and deciders
	// (their choice is recorded) draw the same on every run.
	r := loom.Random(ctx)
	c := r.IntN(n)
	seeded := mrand.New(mrand.NewPCG(1, 2))
	d := seeded.IntN(n) + rand.New(rand.NewSource(7)).Intn(n)
	roll, err := loom.Decide(ctx, "roll", func() (int, error) { return mrand.IntN(6), nil })
	if err != nil {
		return 0, err
	}
	choose := func() (int, error) { return rand.Intn(6), nil }
	again, err := loom.Decide(ctx, "again", choose)
	if err != nil {
		return 0, err
	}
	if _, err := ctx.Decide("pick", func() (any, error) { return mrand.IntN(2), nil }); err != nil {
		return 0, err
	}
	return a + b + c + d + roll + again, nil
})
