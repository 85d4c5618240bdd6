package fold

import (
	"strconv"

	"github.com/loom-kernel/loom/event"
)

// SequenceGapError refuses an event whose sequence is not the one after the
// last folded: the log is corrupt (an event lost, repeated or foreign) or was
// read out of order. Folding past it would build a state no writer recorded.
type SequenceGapError struct {
	// ExecutionID is the refused event's execution id.
	ExecutionID string
	// Want is the sequence that had to come next; Got is the one that did.
	Want, Got int64
}

func (e *SequenceGapError) Error() string {
	return "fold: execution " + strconv.Quote(e.ExecutionID) + ": event sequence " +
		strconv.FormatInt(e.Got, 10) + " where " + strconv.FormatInt(e.Want, 10) +
		" was due: the log is corrupt or was read out of order"
}

// FoldChecked is FoldFrom with the log's contiguity checked, an invariant
// cheap enough to keep always on: the first event must have sequence
// base.Sequence+1 (0 from Initial, whose Sequence is -1; k+1 after a
// snapshot at k), and each next event the one after. At the first event that
// does not, it returns the zero State and a *SequenceGapError: nothing is
// folded past the gap and no partial state is handed out. base is not
// modified. An empty evs returns base.
func FoldChecked(base State, evs []event.Envelope) (State, error) {
	f := NewFolder(base)
	for _, e := range evs {
		if err := f.ApplyChecked(e); err != nil {
			return State{}, err
		}
	}
	return f.State(), nil
}

// ApplyChecked folds e if its sequence is the one after the current state's
// (Peek().Sequence+1). Otherwise it folds nothing, leaves the Folder as it
// was and returns a *SequenceGapError.
func (f *Folder) ApplyChecked(e event.Envelope) error {
	if want := f.s.Sequence + 1; e.Sequence != want {
		return &SequenceGapError{ExecutionID: e.ExecutionID, Want: want, Got: e.Sequence}
	}
	f.Apply(e)
	return nil
}
