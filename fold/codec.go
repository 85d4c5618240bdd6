package fold

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/event"
)

// ErrInvalidState matches errors decoding an encoded state.
var ErrInvalidState = errors.New("fold: invalid encoded state")

// SnapshotVersionError is returned for a snapshot written under a schema
// this fold cannot read: another major version, or a newer minor. The caller
// falls back to folding the log, which is always authoritative.
type SnapshotVersionError struct {
	Version string
}

func (e *SnapshotVersionError) Error() string {
	return "fold: snapshot schema version " + strconv.Quote(e.Version) +
		" is not readable by schema " + event.SchemaVersion
}

// Encode renders s in canonical JSON (keys sorted, event.Canonical): the
// bytes fold vectors compare and snapshots store. Equal states encode to
// equal bytes.
func Encode(s State) ([]byte, error) {
	raw, err := EncodeSnapshot(s)
	if err != nil {
		return nil, err
	}
	return event.Canonical(raw)
}

// EncodeSnapshot renders s faithfully but not canonically (encoding/json
// field order, payloads as recorded): what a snapshot store keeps. It is
// several times cheaper than Encode; Decode reads both.
func EncodeSnapshot(s State) ([]byte, error) {
	if s.Frames == nil {
		s.Frames = map[string]Frame{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Decode parses a state written by Encode or EncodeSnapshot under the
// current schema, exactly (event.UnmarshalExactKnown): a field name in
// another case, an unknown or repeated field, invalid UTF-8 or a lone
// surrogate escape, trailing data and __proto__ container keys are refused
// with ErrInvalidState.
func Decode(b []byte) (State, error) {
	var s State
	if err := event.UnmarshalExactKnown(b, &s); err != nil {
		return State{}, errors.Join(ErrInvalidState, err)
	}
	if s.Frames == nil {
		s.Frames = map[string]Frame{}
	}
	if hasProtoKey(s) {
		return State{}, errors.Join(ErrInvalidState, errors.New("a container holds the refused __proto__ key"))
	}
	return s, nil
}

func hasProtoKey(s State) bool {
	v := s.Variables
	_, a := s.Frames[ProtoKey]
	_, b := v.Decisions[ProtoKey]
	_, c := v.FlowEmits[ProtoKey]
	_, d := v.WaitAnswers[ProtoKey]
	_, e := v.InDoubt[ProtoKey]
	_, f := v.Inbox[ProtoKey]
	_, g := v.Quarantined[ProtoKey]
	_, h := v.Scopes[ProtoKey]
	i := false
	if v.Resources != nil {
		_, i = v.Resources.Custom[ProtoKey]
	}
	return a || b || c || d || e || f || g || h || i
}

// NormalizeSnapshot reads a snapshot's state written by the fold of
// schemaVersion and brings it to the current shape (spec §4):
//
//   - before 1.21.0 a caught STEP_FAILED folded the execution to failed. A
//     failed state with no _error is repaired: suspended with
//     _failedWhileParked when it was parked, running otherwise. (A genuine
//     failure re-opened by resumeAs that then caught a step failure cannot be
//     told apart and stays failed: delete such snapshots.)
//   - before 1.26.0 settled frames kept their input; it is dropped, in one
//     pass over the frames.
//   - before 1.24.0 decisions carry no seq; none is invented.
//
// A snapshot from another major or a newer minor is refused with
// *SnapshotVersionError.
func NormalizeSnapshot(schemaVersion string, b []byte) (State, error) {
	v, ok := parseVersion(schemaVersion)
	cur, _ := parseVersion(event.SchemaVersion)
	if !ok || v[0] != cur[0] || compareVersion(v, cur) > 0 {
		return State{}, &SnapshotVersionError{Version: schemaVersion}
	}
	s, err := Decode(b)
	if err != nil {
		return State{}, err
	}
	if compareVersion(v, [3]int{1, 21, 0}) < 0 && s.Status == StatusFailed && len(s.Variables.Error) == 0 {
		if s.Variables.SuspendedOn != nil {
			s.Status = StatusSuspended
			s.Variables.FailedWhileParked = true
		} else {
			s.Status = StatusRunning
		}
	}
	if compareVersion(v, [3]int{1, 26, 0}) < 0 {
		for id, fr := range s.Frames { //loom:order-independent each frame rewritten on its own
			if fr.Status.Settled() && fr.Input != nil {
				fr.Input = nil
				s.Frames[id] = fr
			}
		}
	}
	return s, nil
}

func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

func compareVersion(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
