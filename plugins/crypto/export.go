package crypto

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/replay"
	"github.com/loom-kernel/loom/store"
)

// SubjectExport is everything the stores hold about a subject (a data
// subject's access request): each execution sealed under it, with its
// whole history — the log and, for a compacted one, the events in the
// archive — unsealed. After EraseSubject the members read as shredded
// markers: what is held is then nothing readable.
type SubjectExport struct {
	Subject    string            `json:"subject"`
	Executions []ExportedHistory `json:"executions"`
}

// ExportedHistory is one execution's history in a SubjectExport.
type ExportedHistory struct {
	ExecutionID string            `json:"executionId"`
	Events      []json.RawMessage `json:"events"` // envelopes as event.Encode writes them
}

// ExportSubject gathers what the stores hold about subject: the
// executions ExecutionsOf finds, each read through s (unsealed) with the
// events compaction moved into archive — pass the app's sealing
// ArchiveStore (NewArchiveStore), or nil when it compacts nothing. A
// compacted execution with no archive given fails the export with an
// error naming it: an export must not leave out what is held.
func (s *EventStore) ExportSubject(ctx context.Context, subject string, archive store.ArchiveStore) (SubjectExport, error) {
	if err := validSubject(subject); err != nil {
		return SubjectExport{}, err
	}
	ids, err := s.ExecutionsOf(ctx, subject)
	if err != nil {
		return SubjectExport{}, err
	}
	out := SubjectExport{Subject: subject, Executions: make([]ExportedHistory, 0, len(ids))}
	for _, id := range ids {
		log, err := replay.History(ctx, s, archive, id)
		if err != nil {
			return SubjectExport{}, fmt.Errorf("crypto: exporting %q: %w", id, err)
		}
		h := ExportedHistory{ExecutionID: id, Events: make([]json.RawMessage, len(log))}
		for i, e := range log {
			b, err := event.Encode(e)
			if err != nil {
				return SubjectExport{}, fmt.Errorf("crypto: exporting %q: %w", id, err)
			}
			h.Events[i] = b
		}
		out.Executions = append(out.Executions, h)
	}
	return out, nil
}
