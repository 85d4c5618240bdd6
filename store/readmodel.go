package store

import (
	"context"
	"encoding/json"

	"github.com/loom-kernel/loom/event"
)

// Read models: the durable rows projections fold the log into (issue 18,
// point 3). A read model is a cache of the log, never an authority: a
// projection can always be Reset and rebuilt from the events, and replay,
// resume and fork never read it.
//
// A projection folds the events of a source (an execution's log, or any
// named stream) in sequence order and writes the rows it derives through
// Apply, which moves the projection's watermark on that source in the same
// transaction. Apply is a compare-and-set on the watermark and on every row
// it writes, so several nodes may run the same projection over the same
// sources with no lock between them: exactly one Apply of each step wins,
// and a loser re-reads (Watermark, Get) and retries or skips. Nothing else
// coordinates them.

// ReadModelStoreSPIVersion versions the ReadModelStore SPI (pinned with
// its method set by TestReadModelStoreSPIVersionPinsMethodSet).
const ReadModelStoreSPIVersion = "1.0.0"

// Read-model limits: every Apply and Query is checked against them before
// anything is read or written (ValidateReadModelApply,
// ValidateReadModelQuery), and a value past one is refused with
// *InvalidReadModelError.
const (
	// MaxReadModelBytes is the default cap on one row's Doc:
	// event.DefaultMaxPayloadBytes (16 MiB), the cap of an event payload.
	// A store configured with event.Limits applies its MaxPayloadBytes
	// instead. A Doc over the cap is refused with an *InvalidReadModelError
	// wrapping an *event.PayloadTooLargeError (Field "doc").
	MaxReadModelBytes = event.DefaultMaxPayloadBytes
	// MaxReadModelBatchBytes caps the Docs of one Apply together: 64 MiB.
	MaxReadModelBatchBytes = 64 << 20
	// MaxReadModelWrites caps the writes of one Apply: a projection that
	// derives more from one step splits it over several steps.
	MaxReadModelWrites = 1000
	// MaxReadModelFields caps the indexed fields of one row, and the
	// pairs of one query's Where.
	MaxReadModelFields = 32
	// MaxReadModelFieldValueBytes caps one indexed field's value, so an
	// index entry of (kind, name, value, id) fits any store's index.
	MaxReadModelFieldValueBytes = 512
	// DefaultReadModelQueryLimit is the page size of a Query with Limit < 1.
	DefaultReadModelQueryLimit = 100
	// MaxReadModelQueryLimit is the largest page a Query returns: a larger
	// Limit is lowered to it.
	MaxReadModelQueryLimit = 1000
	// NoWatermark is the watermark of a (projection, source) that has
	// folded nothing: the from of its first Apply.
	NoWatermark int64 = -1
)

// ReadModel is one row of a read model. Kind and ID are its key; Kind
// names the model ("order", "invoice") and ID the row within it.
type ReadModel struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Projection is the projection that wrote the row, which alone may
	// write it again and whose Reset removes it. It is set by the store
	// on reads and ignored on writes (the row is Apply's projection's).
	Projection string `json:"projection,omitempty"`
	// Fields are the row's indexed fields: a Query selects rows by
	// equality on them. Values are strings (a projection renders numbers
	// and flags as it wants them matched). Nil and empty are the same.
	Fields map[string]string `json:"fields,omitempty"`
	// Doc is the row's JSON document, returned byte for byte as written.
	Doc json.RawMessage `json:"doc"`
	// Version is the row's revision, assigned by the store: 1 when it is
	// inserted, one more on every write. It is ignored on writes (see
	// ReadModelWrite.ExpectVersion). A deleted row is absent (version 0),
	// so a row written again after a delete starts at 1.
	Version int64 `json:"version"`
}

// ReadModelWrite is one write of an Apply.
type ReadModelWrite struct {
	// Row is the row to store under (Row.Kind, Row.ID), or, with Delete,
	// the key of the row to remove (its Fields and Doc are then ignored).
	Row ReadModel `json:"row"`
	// ExpectVersion is the version of the row the writer read: 0 when it
	// read no row. The write is refused unless the row is still at it.
	ExpectVersion int64 `json:"expectVersion"`
	// Delete removes the row. Deleting a row that is absent, expecting 0,
	// succeeds and changes nothing.
	Delete bool `json:"delete,omitempty"`
}

// Watermark says how far a projection has folded a source: every event of
// Source up to and including Sequence. A source is an execution id or any
// stream name the projection chooses.
type Watermark struct {
	Projection string `json:"projection"`
	Source     string `json:"source"`
	Sequence   int64  `json:"sequence"`
}

// WatermarkPage is one page of Watermarks. Next is the cursor to pass as
// after for the next page, "" on the last page.
type WatermarkPage struct {
	Watermarks []Watermark `json:"watermarks"`
	Next       string      `json:"next,omitempty"`
}

// ReadModelQuery selects the rows of Kind whose Fields hold every pair of
// Where, ordered by ID in code-point order (byte order of UTF-8), a page at
// a time: After is the ID of the last row of the previous page ("" for the
// first), Limit the page size (DefaultReadModelQueryLimit when < 1, at most
// MaxReadModelQueryLimit). An empty Where selects every row of Kind. The
// order of Where's pairs (a map) never changes the result.
type ReadModelQuery struct {
	Kind  string            `json:"kind"`
	Where map[string]string `json:"where,omitempty"`
	After string            `json:"after,omitempty"`
	Limit int               `json:"limit,omitempty"`
}

// ReadModelPage is one page of a Query: its rows, and Next, the cursor of
// the next page (the ID of the last row), "" exactly on the page that ends
// the result. A row written between two pages is on a later page iff its ID
// sorts after the cursor; a page never holds a row twice.
type ReadModelPage struct {
	Rows []ReadModel `json:"rows"`
	Next string      `json:"next,omitempty"`
}

// ReadModelStore keeps read models and the watermarks of the projections
// that write them. Every method is safe for concurrent use, by several
// processes when the store is shared; a store copies what it is given and
// what it returns. Bad input (see ValidateReadModelApply and
// ValidateReadModelQuery) is refused with *InvalidReadModelError before
// anything is read or written. A store that has a Close method returns
// ErrClosed from every method once closed.
type ReadModelStore interface {
	// Apply writes the rows of one step of projection over source, and
	// moves its watermark from from to to, in ONE atomic transaction,
	// durable before it returns. It succeeds only if the stored watermark
	// of (projection, source) is from (NoWatermark, -1, when there is
	// none) and every write's ExpectVersion is its row's current version
	// (0 when absent) and its row is absent or projection's. Otherwise it
	// writes nothing and returns, checking in this order,
	// *WatermarkConflictError, then for the first refused write in (Kind,
	// ID) order *ReadModelOwnerError or *ReadModelVersionConflictError.
	// A successful write leaves its row at ExpectVersion+1 (or absent, for
	// a delete). An empty writes only moves the watermark. to must be
	// greater than from; it need not be from+1 (a step may span events
	// that change nothing).
	Apply(ctx context.Context, projection, source string, from, to int64, writes []ReadModelWrite) error
	// Watermark returns the watermark of (projection, source), and false
	// with NoWatermark when it has none.
	Watermark(ctx context.Context, projection, source string) (int64, bool, error)
	// Watermarks returns up to limit watermarks of projection whose source
	// sorts after after in code-point order, ascending, and the cursor of
	// the next page ("" when there is none); limit follows Query's Limit.
	Watermarks(ctx context.Context, projection, after string, limit int) (WatermarkPage, error)
	// Get returns the row (kind, id), and false when there is none.
	Get(ctx context.Context, kind, id string) (ReadModel, bool, error)
	// Query returns a page of the rows q selects (see ReadModelQuery).
	Query(ctx context.Context, q ReadModelQuery) (ReadModelPage, error)
	// Reset removes every watermark of projection and every row it wrote,
	// of every kind, in one transaction, so it can be rebuilt from the log
	// (every source from NoWatermark). Resetting a projection with nothing
	// stored is not an error. An Apply of projection racing a Reset is
	// ordered wholly before or after it.
	Reset(ctx context.Context, projection string) error
}
