package event

import (
	"errors"
	"strconv"
)

// ErrInvalidEnvelope matches every *InvalidEnvelopeError and
// *PayloadTooLargeError with errors.Is.
var ErrInvalidEnvelope = errors.New("event: invalid envelope")

// ErrPayloadTooLarge matches every *PayloadTooLargeError with errors.Is.
var ErrPayloadTooLarge = errors.New("event: payload too large")

// InvalidEnvelopeError says which field of an envelope was refused and why.
// It never echoes the refused bytes.
type InvalidEnvelopeError struct {
	Field  string
	Reason string
}

func (e *InvalidEnvelopeError) Error() string {
	return "event: invalid envelope: " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidEnvelope) true.
func (e *InvalidEnvelopeError) Is(target error) bool { return target == ErrInvalidEnvelope }

// PayloadTooLargeError is returned when a payload, metadata or a whole
// envelope exceeds its cap.
type PayloadTooLargeError struct {
	Field string
	Size  int
	Limit int
}

func (e *PayloadTooLargeError) Error() string {
	return "event: " + e.Field + " is " + strconv.Itoa(e.Size) + " bytes, over the " + strconv.Itoa(e.Limit) + "-byte cap"
}

// Is makes errors.Is match both ErrPayloadTooLarge and ErrInvalidEnvelope.
func (e *PayloadTooLargeError) Is(target error) bool {
	return target == ErrPayloadTooLarge || target == ErrInvalidEnvelope
}

func asErr[T any](err error, target *T) bool { return errors.As(err, target) }
