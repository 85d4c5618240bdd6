package crypto_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/store"
)

// TestContentSubjectSealsClaimedOutputsUnderTheExecutionsSubject: a step
// output the claim check moves into the sealing ContentStore is sealed
// under the execution's subject with no subject in the app's context, so
// it reads back under that subject only and is shredded with it.
func TestContentSubjectSealsClaimedOutputsUnderTheExecutionsSubject(t *testing.T) {
	ctx := context.Background()
	s := openSealedSQLite(t, t.TempDir())
	big := strings.Repeat(secret+"-claimed ", 100)
	fetch := loom.NewStep("fetch", func(ctx context.Context, in doc) (doc, error) { return doc{"report": big}, nil })
	// The flow returns what the step recorded: the claim envelope.
	flow := loom.NewFlow("report", func(c *loom.Context, in doc) (doc, error) { return loom.Run(c, fetch, in) })
	rt, err := loom.New(loom.Config{Storage: s.set, Flows: []*loom.Flow{flow}, Recovery: loom.Recovery{Disabled: true},
		Middleware: []effect.Middleware{
			crypto.ContentSubject(s.events),
			middleware.ClaimCheck(s.set.Content, middleware.ClaimCheckOptions{MaxInlineBytes: 256}),
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close() }()
	id, err := rt.Start(ctx, "report", doc{"user": "user-9"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("report: %v, %v", res.Status, err)
	}
	recorded := res.Output
	claim, ok := middleware.ParseClaim(recorded)
	if !ok {
		t.Fatalf("the step recorded %s, want a claim envelope", recorded)
	}
	for _, r := range rawRows(t, s.dir+"/loom.db") {
		if strings.Contains(r, secret) {
			t.Fatalf("a raw row holds plaintext: %.120s", r)
		}
	}
	got, err := middleware.Resolve(crypto.WithSubject(ctx, "user-9"), s.set.Content, recorded)
	if err != nil || !strings.Contains(string(got), secret+"-claimed") {
		t.Fatalf("Resolve under user-9 = %.80s, %v; want the step's output", got, err)
	}
	if _, err := s.set.Content.Get(crypto.WithSubject(ctx, "user-8"), claim.Ref); !errors.Is(err, store.ErrContentNotFound) {
		t.Fatalf("Get under another subject = %v, want store.ErrContentNotFound", err)
	}
	if _, err := s.events.EraseSubject(ctx, "user-9"); err != nil {
		t.Fatal(err)
	}
	var kd *crypto.KeyDestroyedError
	if _, err := s.set.Content.Get(crypto.WithSubject(ctx, "user-9"), claim.Ref); !errors.As(err, &kd) {
		t.Fatalf("Get after erasure = %v, want *crypto.KeyDestroyedError", err)
	}
}
