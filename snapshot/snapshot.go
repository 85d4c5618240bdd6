// Package snapshot is the codec between folded state and a SnapshotStore's
// bytes: the state's faithful JSON (fold.EncodeSnapshot), compressed with
// zstd. Folded state is repetitive — frame after frame of the same keys — so
// a checkpoint of a long execution shrinks several times, and with it the
// write that a park or a periodic checkpoint costs.
//
// Decode reads what Encode writes and also plain JSON states (older
// snapshots, other tools), telling them apart by the zstd frame's magic
// number; it then applies fold.NormalizeSnapshot for the schema version the
// snapshot was written under.
package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/loom-kernel/loom/fold"
)

// MaxDecodedBytes bounds the state a snapshot may expand to.
const MaxDecodedBytes = 1 << 30

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

var (
	codecOnce sync.Once
	encoder   *zstd.Encoder
	decoder   *zstd.Decoder
	codecErr  error
)

func codec() (*zstd.Encoder, *zstd.Decoder, error) {
	codecOnce.Do(func() {
		encoder, codecErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if codecErr != nil {
			return
		}
		decoder, codecErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxDecodedBytes))
	})
	return encoder, decoder, codecErr
}

// Encode renders s for a SnapshotStore: zstd-compressed faithful JSON.
func Encode(s fold.State) ([]byte, error) {
	raw, err := fold.EncodeSnapshot(s)
	if err != nil {
		return nil, err
	}
	enc, _, err := codec()
	if err != nil {
		return nil, err
	}
	return enc.EncodeAll(raw, make([]byte, 0, len(raw)/4)), nil
}

// ErrCorrupt matches a snapshot that does not decompress.
var ErrCorrupt = errors.New("snapshot: corrupt compressed state")

// Decode reads a snapshot's state written under schemaVersion, compressed
// or plain, and normalizes older shapes (fold.NormalizeSnapshot). Errors are
// *fold.SnapshotVersionError, ErrCorrupt or fold.ErrInvalidState; the caller
// falls back to the log, which is always authoritative.
func Decode(schemaVersion string, b []byte) (fold.State, error) {
	if bytes.HasPrefix(b, zstdMagic) {
		_, dec, err := codec()
		if err != nil {
			return fold.State{}, err
		}
		raw, err := dec.DecodeAll(b, nil)
		if err != nil {
			return fold.State{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		b = raw
	}
	return fold.NormalizeSnapshot(schemaVersion, b)
}
