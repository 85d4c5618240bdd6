package store

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
)

// The checks every ReadModelStore makes, stated once: a store validates a
// call before it reads or writes anything, then, inside its transaction,
// checks the watermark (CheckWatermark) and each write against its row
// (CheckReadModelWrite) in SortReadModelWrites order, so every store
// refuses the same batch with the same error.

// ValidateReadModelApply refuses, with *InvalidReadModelError, an Apply no
// store may run: a projection or source event.ValidateID refuses; a from
// below NoWatermark or a to not above from; more than MaxReadModelWrites
// writes; a write whose Kind or ID event.ValidateID refuses; two writes of
// one (Kind, ID); and, for a write that is not a Delete, more than
// MaxReadModelFields fields, a field name event.ValidateID refuses, a field
// value that is not UTF-8, holds a NUL byte or passes
// MaxReadModelFieldValueBytes, or a Doc that is empty, not UTF-8 JSON, or
// over lim's MaxPayloadBytes (MaxReadModelBytes when 0; then Err is an
// *event.PayloadTooLargeError of Field "doc"); and, checked before any
// write, the Docs of the writes that are not Deletes over
// MaxReadModelBatchBytes together (Field "writes").
func ValidateReadModelApply(projection, source string, from, to int64, writes []ReadModelWrite, lim event.Limits) error {
	if err := ValidateWatermarkKey(projection, source); err != nil {
		return err
	}
	switch {
	case from < NoWatermark:
		return &InvalidReadModelError{Index: -1, Field: "from", Reason: "below -1 (NoWatermark)"}
	case to <= from:
		return &InvalidReadModelError{Index: -1, Field: "to", Reason: "not above from " + strconv.FormatInt(from, 10)}
	case len(writes) > MaxReadModelWrites:
		return &InvalidReadModelError{Index: -1, Field: "writes",
			Reason: strconv.Itoa(len(writes)) + " writes, over the cap of " + strconv.Itoa(MaxReadModelWrites)}
	}
	total := 0
	for _, w := range writes {
		if !w.Delete {
			total += len(w.Row.Doc)
		}
	}
	if total > MaxReadModelBatchBytes { // before any document is parsed
		return &InvalidReadModelError{Index: -1, Field: "writes", Reason: "documents over the batch cap",
			Err: &event.PayloadTooLargeError{Field: "doc", Size: total, Limit: MaxReadModelBatchBytes}}
	}
	docCap := lim.MaxPayloadBytes
	if docCap < 1 {
		docCap = MaxReadModelBytes
	}
	for i, w := range writes {
		if err := validateReadModelWrite(i, w, docCap); err != nil {
			return err
		}
	}
	sorted := SortReadModelWrites(writes)
	for i := 1; i < len(sorted); i++ {
		if a, b := sorted[i-1].Row, sorted[i].Row; a.Kind == b.Kind && a.ID == b.ID {
			return &InvalidReadModelError{Index: slices.IndexFunc(writes, func(w ReadModelWrite) bool {
				return w.Row.Kind == b.Kind && w.Row.ID == b.ID
			}), Field: "id", Reason: "two writes of " + strconv.Quote(b.Kind) + "/" + strconv.Quote(b.ID) + " in one Apply"}
		}
	}
	return nil
}

// validateReadModelWrite checks one write of an Apply.
func validateReadModelWrite(i int, w ReadModelWrite, docCap int) error {
	if err := validateKey(i, w.Row.Kind, w.Row.ID); err != nil {
		return err
	}
	if w.ExpectVersion < 0 {
		return &InvalidReadModelError{Index: i, Field: "expectVersion", Reason: "negative"}
	}
	if w.Delete {
		return nil
	}
	if err := validateFields(i, "fields", w.Row.Fields); err != nil {
		return err
	}
	switch d := w.Row.Doc; {
	case len(d) == 0:
		return &InvalidReadModelError{Index: i, Field: "doc", Reason: "empty: a row's document is JSON"}
	case len(d) > docCap:
		return &InvalidReadModelError{Index: i, Field: "doc", Reason: "over the cap",
			Err: &event.PayloadTooLargeError{Field: "doc", Size: len(d), Limit: docCap}}
	case !utf8.Valid(d):
		return &InvalidReadModelError{Index: i, Field: "doc", Reason: "not valid UTF-8"}
	case !json.Valid(d):
		return &InvalidReadModelError{Index: i, Field: "doc", Reason: "not valid JSON"}
	}
	return nil
}

// validateKey checks a row's kind and id.
func validateKey(i int, kind, id string) error {
	if err := event.ValidateID("kind", kind); err != nil {
		return &InvalidReadModelError{Index: i, Field: "kind", Reason: "bad kind", Err: err}
	}
	if err := event.ValidateID("id", id); err != nil {
		return &InvalidReadModelError{Index: i, Field: "id", Reason: "bad id", Err: err}
	}
	return nil
}

// validateFields checks indexed fields (field "fields") or a query's pairs
// (field "where"), in name order so the first refused is the same on every
// run.
func validateFields(i int, field string, fields map[string]string) error {
	if len(fields) > MaxReadModelFields {
		return &InvalidReadModelError{Index: i, Field: field,
			Reason: strconv.Itoa(len(fields)) + " fields, over the cap of " + strconv.Itoa(MaxReadModelFields)}
	}
	for _, name := range SortedFieldNames(fields) {
		if err := event.ValidateID("name", name); err != nil {
			return &InvalidReadModelError{Index: i, Field: field, Reason: "bad field name", Err: err}
		}
		switch v := fields[name]; {
		case len(v) > MaxReadModelFieldValueBytes:
			return &InvalidReadModelError{Index: i, Field: field, Reason: "the value of " + strconv.Quote(name) +
				" is longer than " + strconv.Itoa(MaxReadModelFieldValueBytes) + " bytes"}
		case !utf8.ValidString(v):
			return &InvalidReadModelError{Index: i, Field: field, Reason: "the value of " + strconv.Quote(name) + " is not valid UTF-8"}
		case strings.IndexByte(v, 0) >= 0:
			return &InvalidReadModelError{Index: i, Field: field, Reason: "the value of " + strconv.Quote(name) + " holds a NUL byte"}
		}
	}
	return nil
}

// ValidateReadModelKey refuses, with *InvalidReadModelError (Field "kind"
// or "id"), a key no row can have: what Get checks first.
func ValidateReadModelKey(kind, id string) error { return validateKey(-1, kind, id) }

// ValidateProjection refuses, with *InvalidReadModelError (Field
// "projection"), a projection name event.ValidateID refuses: what Reset
// and Watermarks check first.
func ValidateProjection(projection string) error {
	if err := event.ValidateID("projection", projection); err != nil {
		return &InvalidReadModelError{Index: -1, Field: "projection", Reason: "bad projection", Err: err}
	}
	return nil
}

// ValidateWatermarkKey refuses, with *InvalidReadModelError (Field
// "projection" or "source"), a (projection, source) no watermark can have:
// what Watermark checks first.
func ValidateWatermarkKey(projection, source string) error {
	if err := ValidateProjection(projection); err != nil {
		return err
	}
	if err := event.ValidateID("source", source); err != nil {
		return &InvalidReadModelError{Index: -1, Field: "source", Reason: "bad source", Err: err}
	}
	return nil
}

// ValidateReadModelQuery refuses, with *InvalidReadModelError, a query no
// store may run: a Kind event.ValidateID refuses (Field "kind"), Where
// pairs refused as an Apply refuses fields (Field "where"), a non-empty
// After that is no valid ID (Field "after": an invalid cursor). It returns
// q with its Limit brought into 1..MaxReadModelQueryLimit.
func ValidateReadModelQuery(q ReadModelQuery) (ReadModelQuery, error) {
	if err := event.ValidateID("kind", q.Kind); err != nil {
		return q, &InvalidReadModelError{Index: -1, Field: "kind", Reason: "bad kind", Err: err}
	}
	if err := validateFields(-1, "where", q.Where); err != nil {
		return q, err
	}
	if err := ValidateReadModelCursor(q.After); err != nil {
		return q, err
	}
	q.Limit = ReadModelPageLimit(q.Limit)
	return q, nil
}

// ValidateReadModelCursor refuses, with *InvalidReadModelError (Field "after"), a
// non-empty page cursor that no row ID or source could be.
func ValidateReadModelCursor(after string) error {
	if after == "" {
		return nil
	}
	if err := event.ValidateID("after", after); err != nil {
		return &InvalidReadModelError{Index: -1, Field: "after", Reason: "not a cursor a page returned", Err: err}
	}
	return nil
}

// ReadModelPageLimit brings a page size into 1..MaxReadModelQueryLimit:
// DefaultReadModelQueryLimit when limit < 1.
func ReadModelPageLimit(limit int) int {
	switch {
	case limit < 1:
		return DefaultReadModelQueryLimit
	case limit > MaxReadModelQueryLimit:
		return MaxReadModelQueryLimit
	}
	return limit
}

// SortReadModelWrites returns a copy of writes sorted by (Row.Kind, Row.ID)
// in code-point order: the order in which stores check and apply them
// (which also makes concurrent Applies lock rows in one order).
func SortReadModelWrites(writes []ReadModelWrite) []ReadModelWrite {
	out := slices.Clone(writes)
	slices.SortFunc(out, func(a, b ReadModelWrite) int {
		return cmp.Or(strings.Compare(a.Row.Kind, b.Row.Kind), strings.Compare(a.Row.ID, b.Row.ID))
	})
	return out
}

// SortedFieldNames returns the names of fields in code-point order: every
// store iterates fields and Where pairs in it, so a map's order never
// shows.
func SortedFieldNames(fields map[string]string) []string {
	names := make([]string, 0, len(fields))
	for name := range fields { //loom:sorted below
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// CheckWatermark returns the *WatermarkConflictError of an Apply from from
// when the stored watermark is actual (NoWatermark when there is none),
// and nil when they agree.
func CheckWatermark(projection, source string, from, actual int64) error {
	if from != actual {
		return &WatermarkConflictError{Projection: projection, Source: source, Expected: from, Actual: actual}
	}
	return nil
}

// CheckReadModelWrite returns the refusal of write w of projection against
// the stored row, at version (0 when absent) and written by owner ("" when
// absent): *ReadModelOwnerError when owner is another projection, then
// *ReadModelVersionConflictError when version is not w.ExpectVersion; nil
// when the write may go ahead.
func CheckReadModelWrite(projection string, w ReadModelWrite, owner string, version int64) error {
	if version > 0 && owner != projection {
		return &ReadModelOwnerError{Kind: w.Row.Kind, ID: w.Row.ID, Projection: projection, Owner: owner}
	}
	if version != w.ExpectVersion {
		return &ReadModelVersionConflictError{Kind: w.Row.Kind, ID: w.Row.ID, Expected: w.ExpectVersion, Actual: version}
	}
	return nil
}

// ReadModelFieldsJSON encodes fields as a JSON object with its keys in
// code-point order ("{}" when empty): how the SQL stores keep a row's
// fields beside its document.
func ReadModelFieldsJSON(fields map[string]string) string {
	if len(fields) == 0 {
		return "{}"
	}
	b, err := json.Marshal(fields) // sorts the keys; strings always encode
	if err != nil {
		panic("store: encoding read model fields: " + err.Error())
	}
	return string(b)
}

// ParseReadModelFields decodes what ReadModelFieldsJSON encoded; an empty
// object gives nil.
func ParseReadModelFields(text string) (map[string]string, error) {
	var fields map[string]string
	if err := json.Unmarshal([]byte(text), &fields); err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, nil
	}
	return fields, nil
}
