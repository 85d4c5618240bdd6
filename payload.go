package loom

import (
	"encoding/json"

	"github.com/loom-kernel/loom/internal/journal"
)

// marshalPayload renders a payload the way the journal records it: nil is
// no payload, a json.RawMessage is taken as it is.
func marshalPayload(p any) (json.RawMessage, error) { return journal.MarshalPayload(p) }
