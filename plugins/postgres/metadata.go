package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// errCorruptMetadata reports a metadata column this package did not write.
var errCorruptMetadata = errors.New("postgres: corrupt metadata column")

// encodeMetadata renders m (values already checked as JSON by
// event.Validate) as one JSON object with sorted keys. Each value keeps its
// text except insignificant whitespace: no HTML escaping, no number
// rewriting, no re-escaping of strings, which is what the storetest
// contract allows for metadata.
func encodeMetadata(m map[string]json.RawMessage) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return "", fmt.Errorf("postgres: encode metadata: %w", err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// decodeMetadata parses what encodeMetadata wrote; each value is the raw
// text stored.
func decodeMetadata(s string) (map[string]json.RawMessage, error) {
	m := make(map[string]json.RawMessage)
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("%w: %w", errCorruptMetadata, err)
	}
	return m, nil
}
