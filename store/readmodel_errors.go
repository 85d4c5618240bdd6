package store

import (
	"errors"
	"strconv"
)

var (
	// ErrWatermarkConflict matches *WatermarkConflictError: another writer
	// moved the projection's watermark first.
	ErrWatermarkConflict = errors.New("store: watermark conflict")
	// ErrReadModelVersionConflict matches *ReadModelVersionConflictError:
	// a row changed since the writer read it.
	ErrReadModelVersionConflict = errors.New("store: read model version conflict")
	// ErrReadModelOwned matches *ReadModelOwnerError: a row belongs to
	// another projection.
	ErrReadModelOwned = errors.New("store: read model row owned by another projection")
	// ErrInvalidReadModel matches *InvalidReadModelError: the call itself
	// is wrong.
	ErrInvalidReadModel = errors.New("store: invalid read model input")
)

// WatermarkConflictError refuses an Apply whose from (Expected) is not the
// stored watermark of (Projection, Source) (Actual, NoWatermark when there
// is none): another writer applied the step first, or the caller skipped
// ahead. Nothing was written; the caller re-reads the watermark and folds
// on from there, or skips.
type WatermarkConflictError struct {
	Projection string
	Source     string
	Expected   int64
	Actual     int64
}

func (e *WatermarkConflictError) Error() string {
	return "store: the watermark of projection " + strconv.Quote(e.Projection) + " on " + strconv.Quote(e.Source) +
		" is " + strconv.FormatInt(e.Actual, 10) + ", not " + strconv.FormatInt(e.Expected, 10)
}

// Is makes errors.Is(err, ErrWatermarkConflict) true.
func (e *WatermarkConflictError) Is(target error) bool { return target == ErrWatermarkConflict }

// ReadModelVersionConflictError refuses an Apply holding a write whose
// ExpectVersion (Expected) is not the version of row (Kind, ID) (Actual, 0
// when absent). Nothing was written.
type ReadModelVersionConflictError struct {
	Kind     string
	ID       string
	Expected int64
	Actual   int64
}

func (e *ReadModelVersionConflictError) Error() string {
	return "store: read model " + strconv.Quote(e.Kind) + "/" + strconv.Quote(e.ID) + " is at version " +
		strconv.FormatInt(e.Actual, 10) + ", not " + strconv.FormatInt(e.Expected, 10)
}

// Is makes errors.Is(err, ErrReadModelVersionConflict) true.
func (e *ReadModelVersionConflictError) Is(target error) bool {
	return target == ErrReadModelVersionConflict
}

// ReadModelOwnerError refuses an Apply of Projection holding a write to row
// (Kind, ID), which Owner wrote: a row belongs to one projection, so two
// projections never overwrite each other's rows and a Reset removes only
// its own. Nothing was written.
type ReadModelOwnerError struct {
	Kind       string
	ID         string
	Projection string
	Owner      string
}

func (e *ReadModelOwnerError) Error() string {
	return "store: read model " + strconv.Quote(e.Kind) + "/" + strconv.Quote(e.ID) + " belongs to projection " +
		strconv.Quote(e.Owner) + ", not " + strconv.Quote(e.Projection)
}

// Is makes errors.Is(err, ErrReadModelOwned) true.
func (e *ReadModelOwnerError) Is(target error) bool { return target == ErrReadModelOwned }

// InvalidReadModelError refuses bad input to a ReadModelStore: an id, a
// field, a document, a range or a cursor that ValidateReadModelApply or
// ValidateReadModelQuery refuses. Index is the offending write of an Apply,
// -1 for the call's own arguments; Field names the argument or member
// ("projection", "source", "from", "to", "writes", "kind", "id", "fields",
// "doc", "where", "after"); Err holds the *event.InvalidEnvelopeError or
// *event.PayloadTooLargeError behind it, if any. Nothing was read or
// written.
type InvalidReadModelError struct {
	Index  int
	Field  string
	Reason string
	Err    error
}

func (e *InvalidReadModelError) Error() string {
	s := "store: invalid read model input"
	if e.Index >= 0 {
		s += " at write " + strconv.Itoa(e.Index)
	}
	s += ": " + e.Field + ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrInvalidReadModel) true.
func (e *InvalidReadModelError) Is(target error) bool { return target == ErrInvalidReadModel }

// Unwrap exposes the validation error behind the refusal, if any.
func (e *InvalidReadModelError) Unwrap() error { return e.Err }
