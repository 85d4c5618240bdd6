package store

import (
	"errors"
	"strconv"
)

var (
	// ErrSequenceConflict matches *SequenceConflictError: the log is not at the
	// sequence the writer expected (a duplicate, a stale writer or a gap).
	ErrSequenceConflict = errors.New("store: sequence conflict")
	// ErrInvalidAppend matches *InvalidAppendError: the batch itself is wrong.
	ErrInvalidAppend = errors.New("store: invalid append")
	// ErrFenced matches *FencedError: a newer driver holds the execution.
	ErrFenced = errors.New("store: fenced by a newer driver")
	// ErrClosed is returned by every method of a closed store.
	ErrClosed = errors.New("store: closed")
	// ErrRefExists is returned when creating a ref whose name is taken.
	ErrRefExists = errors.New("store: ref exists")
	// ErrRefNotFound is returned for a ref that does not exist.
	ErrRefNotFound = errors.New("store: ref not found")
	// ErrRefConflict matches *RefConflictError: the ref moved since it was read.
	ErrRefConflict = errors.New("store: ref version conflict")
)

// SequenceConflictError reports that an append expected the log of
// ExecutionID to hold Expected events but it holds Actual. Nothing was written.
type SequenceConflictError struct {
	ExecutionID string
	Expected    int64
	Actual      int64
}

func (e *SequenceConflictError) Error() string {
	return "store: sequence conflict on execution " + strconv.Quote(e.ExecutionID) +
		": expected next sequence " + strconv.FormatInt(e.Expected, 10) +
		", log is at " + strconv.FormatInt(e.Actual, 10)
}

// Is makes errors.Is(err, ErrSequenceConflict) true.
func (e *SequenceConflictError) Is(target error) bool { return target == ErrSequenceConflict }

// InvalidAppendError reports a malformed batch (empty, non-contiguous
// sequences, an envelope of another execution, or an envelope refused by
// event.Validate, which Err then holds). Nothing was written.
type InvalidAppendError struct {
	Index  int // index of the offending envelope, -1 for the batch
	Reason string
	Err    error
}

func (e *InvalidAppendError) Error() string {
	s := "store: invalid append"
	if e.Index >= 0 {
		s += " at index " + strconv.Itoa(e.Index)
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrInvalidAppend) true.
func (e *InvalidAppendError) Is(target error) bool { return target == ErrInvalidAppend }

// Unwrap exposes the envelope validation error, if any.
func (e *InvalidAppendError) Unwrap() error { return e.Err }

// FencedError reports an append or fence made with Token after a newer
// Current token was acquired for the execution. Nothing was written.
type FencedError struct {
	ExecutionID string
	Token       int64
	Current     int64
}

func (e *FencedError) Error() string {
	return "store: execution " + strconv.Quote(e.ExecutionID) + " is fenced: token " +
		strconv.FormatInt(e.Token, 10) + " is older than " + strconv.FormatInt(e.Current, 10)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// RefConflictError reports a compare-and-set move of a ref whose version
// was no longer Expected. Nothing was changed.
type RefConflictError struct {
	Name     string
	Expected int64
	Actual   int64
}

func (e *RefConflictError) Error() string {
	return "store: ref " + strconv.Quote(e.Name) + " is at version " + strconv.FormatInt(e.Actual, 10) +
		", not " + strconv.FormatInt(e.Expected, 10)
}

// Is makes errors.Is(err, ErrRefConflict) true.
func (e *RefConflictError) Is(target error) bool { return target == ErrRefConflict }
