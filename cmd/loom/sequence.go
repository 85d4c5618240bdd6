package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/cobra"
)

// sequenceValue is a flag that takes a sequence: an event's position in its
// execution's log, 0 for the first. Its parse error says so, instead of
// strconv's.
type sequenceValue struct {
	n   int64
	set bool
}

func (v *sequenceValue) String() string {
	if !v.set {
		return ""
	}
	return strconv.FormatInt(v.n, 10)
}

func (v *sequenceValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("no log reaches sequence %s: a sequence is an event's position in its execution's log (0, 1, 2…), at most %d", s, int64(math.MaxInt64))
	}
	if err != nil {
		return errors.New("a sequence is an event's position in its execution's log: a whole number, 0 for the first event (loom logs <id> lists them)")
	}
	v.n, v.set = n, true
	return nil
}

func (v *sequenceValue) Type() string { return "sequence" }

// sequenceFlag adds a sequence flag named name to cmd.
func sequenceFlag(cmd *cobra.Command, into *sequenceValue, name, usage string) {
	cmd.Flags().Var(into, name, usage)
}
