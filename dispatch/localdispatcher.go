package dispatch

import (
	"context"
	"sync"
)

// DefaultMaxConcurrent is LocalDispatcher's bound when MaxConcurrent is not
// positive.
const DefaultMaxConcurrent = 64

// LocalDispatcher hands every package to one WorkerRuntime with bounded
// concurrency: at most MaxConcurrent Execute calls run at once, and callers
// beyond the bound wait, in no particular order, until a slot frees or their
// ctx ends (then they get ctx's error and the worker never sees the
// package). Invalid packages are refused with a *PackageError before they
// take a slot.
//
// The zero value is not usable (it has no Worker); set the fields before the
// first Dispatch and do not change them afterwards. It is safe for
// concurrent use.
type LocalDispatcher struct {
	// Worker runs the packages. Required.
	Worker WorkerRuntime
	// MaxConcurrent bounds the concurrent Execute calls (default
	// DefaultMaxConcurrent).
	MaxConcurrent int

	once  sync.Once
	slots chan struct{}
}

// Dispatch runs pkg on the worker once a slot is free; see LocalDispatcher.
func (d *LocalDispatcher) Dispatch(ctx context.Context, pkg ExecutionPackage) (ExecutionResult, error) {
	if d.Worker == nil {
		return ExecutionResult{}, ErrNoWorker
	}
	if err := pkg.Validate(); err != nil {
		return ExecutionResult{}, err
	}
	d.once.Do(func() {
		n := d.MaxConcurrent
		if n <= 0 {
			n = DefaultMaxConcurrent
		}
		d.slots = make(chan struct{}, n)
	})
	if err := ctx.Err(); err != nil {
		return ExecutionResult{}, err // an ended ctx never takes a slot, even a free one
	}
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return ExecutionResult{}, ctx.Err()
	}
	defer func() { <-d.slots }()
	return d.Worker.Execute(ctx, pkg)
}
