package loom

import (
	"context"
	"slices"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// MarkShredded records on execution id that the data of subject in it
// was crypto-shredded (K10): a kernel-stamped PAYLOAD_SHREDDED {subject},
// folded into the state's _shredded, which the inspector and the CLI show.
// Call it for each execution holding the subject's data once its key is
// destroyed (plugins/crypto's EraseSubject does the destroying; its
// payloads then read as shredded markers). It works on a parked or an
// ended execution alike, and is idempotent: a subject already recorded is
// not recorded again. With an Authorizer it is a "shred".
func (rt *Runtime) MarkShredded(ctx context.Context, id, subject string) error {
	if err := event.ValidateID("execution id", id); err != nil {
		return err
	}
	if err := event.ValidateID("subject", subject); err != nil {
		return err
	}
	if err := rt.authorize(ctx, "shred", id, "", true); err != nil {
		return err
	}
	return rt.transact(ctx, id, txSpec{
		op:      "shred",
		anyFlow: true, // an operator's tool records it without the app's flows
		commit: func(ctx context.Context, tx *txn) (bool, error) {
			if slices.ContainsFunc(tx.state.Variables.Shredded, func(s fold.Shredding) bool { return s.Subject == subject }) {
				return false, nil
			}
			_, err := tx.j.Commit(event.PayloadShredded, map[string]any{"subject": subject}, kernelStamp())
			return false, err
		},
	})
}
