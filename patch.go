package loom

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Patching in-flight code. A flow whose code changes while executions of
// it are parked or running branches on a patch: new executions take the
// new path, and an execution already past the patch point when the code
// changed keeps the old one, on every replay. The choice is a kernel
// decision (DECISION_RECORDED under "__loom_patch:<id>"), recorded the
// first time a drive reaches the patch doing new work; an execution whose
// log already holds work past that point (steps, decisions or gate answers
// this drive has not served yet, or a park or an end) is an old one, and
// gets DefaultVersion without anything recorded.

// DefaultVersion is the version Version returns to an execution that ran
// the code before the patch existed.
const DefaultVersion = 0

// patchPrefix starts the decision id of a patch.
const patchPrefix = reservedPrefix + "patch:"

// PatchVersionError fails a flow whose execution recorded (or, being older
// than the patch, implies) a version of a patch that this code no longer
// supports: its Version call's min is above it. Keep the old branch (lower
// min) until no such execution is in flight — replay.Check tells.
type PatchVersionError struct {
	PatchID  string
	Version  int
	Min, Max int
}

func (e *PatchVersionError) Error() string {
	return "loom: patch " + strconv.Quote(e.PatchID) + ": this execution is at version " + strconv.Itoa(e.Version) +
		" but the code supports " + strconv.Itoa(e.Min) + ".." + strconv.Itoa(e.Max) +
		": keep the branch for version " + strconv.Itoa(e.Version) + " until no execution at it is in flight"
}

// Patched reports whether the execution takes the new path of patch id:
// true for an execution that reaches the patch doing new work (recorded),
// false for one whose log already went past it under the old code. It is
// Version(ctx, id, DefaultVersion, 1) == 1.
//
//	if ctx.Patched("fraud-check") {
//		if _, err := loom.Run(ctx, fraudCheck, order); err != nil { … }
//	}
//
// Once no execution that took the old path is in flight, delete the old
// branch and then the call (docs/changing-flows.md).
func (c *Context) Patched(id string) bool {
	v, err := Version(c, id, DefaultVersion, 1)
	if err != nil {
		panic(err.Error()) // only an invalid id: a programming error, failing the flow loudly
	}
	return v == 1
}

// Version returns the version of patch id this execution runs: the
// recorded one; DefaultVersion for an execution whose log went past the
// patch point before the patch existed; else max, recorded. A recorded (or
// implied) version outside min..max fails with *PatchVersionError. Raise
// max for each new variant of the code; raise min to drop a variant no
// execution in flight still runs.
func Version(ctx *Context, id string, min, max int) (int, error) {
	ctx.checkpoint()
	if err := event.ValidateID("patch id", id); err != nil {
		return 0, err
	}
	if min > max || min < DefaultVersion {
		return 0, fmt.Errorf("loom: patch %q: versions %d..%d: min must be at least DefaultVersion (0) and at most max", id, min, max)
	}
	r := ctx.drive
	did := patchPrefix + id
	v, found, err := ctx.recordedVersion(did)
	switch {
	case err != nil:
		return 0, err
	case !found:
		r.mu.Lock()
		cached, seen := r.patches[id]
		r.mu.Unlock()
		switch {
		case seen:
			v = cached
		case ctx.replayingPast():
			v = DefaultVersion
		default:
			raw, err := ctx.decide(did, func() (any, error) { return max, nil }, nil)
			if err != nil {
				return 0, err
			}
			if err := unmarshalRecorded(raw, &v); err != nil {
				return 0, fmt.Errorf("loom: patch %q: recorded version unreadable: %w", id, err)
			}
		}
		r.mu.Lock()
		if r.patches == nil {
			r.patches = map[string]int{}
		}
		r.patches[id] = v
		r.mu.Unlock()
	}
	if v < min || v > max {
		return 0, &PatchVersionError{PatchID: id, Version: v, Min: min, Max: max}
	}
	return v, nil
}

// recordedVersion reads the version the log recorded for a patch.
func (c *Context) recordedVersion(did string) (v int, found bool, err error) {
	var d fold.Decision
	c.state(func(s *fold.State) { d, found = s.Variables.Decisions[did] })
	if !found {
		return 0, false, nil
	}
	if err := unmarshalRecorded(d.Choice, &v); err != nil {
		return 0, false, fmt.Errorf("loom: patch decision %q unreadable: %w", did, err)
	}
	return v, true, nil
}

// replayingPast says the log holds work this drive has not served yet: a
// step or decision it has not issued, a gate answer it has not consumed,
// or a park or an end the execution stands at. Code reached now ran, in
// the first run, before that work — under the code before the patch.
func (c *Context) replayingPast() bool {
	r := c.drive
	replaying := false
	c.state(func(s *fold.State) {
		if s.Status != fold.StatusRunning && s.Status != fold.StatusPending {
			replaying = true
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.gates < len(s.Variables.ResumePayloads) {
			replaying = true
			return
		}
		for id := range s.Frames { //loom:order-independent any unissued
			if _, ok := r.issued[id]; !ok {
				replaying = true
				return
			}
		}
		for id := range s.Variables.Decisions { //loom:order-independent any unissued
			if _, ok := r.issued[id]; !ok && !strings.HasPrefix(id, patchPrefix) {
				replaying = true
				return
			}
		}
	})
	return replaying
}
