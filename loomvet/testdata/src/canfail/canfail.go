// Package canfail has wrong expectations on purpose (TestCases checks the
// harness reports both): a finding without a want, a want without a
// finding.
package canfail

import (
	"time"

	"github.com/loom-kernel/loom"
)

var Wrong = loom.NewFlow("wrong", func(ctx *loom.Context, _ int) (int64, error) {
	a := time.Now().Unix()
	b := loom.Now(ctx).Unix() // want `time.Now in flow code`
	return a + b, nil
})
