// Command loomvet reports Loom flow code that would not replay
// deterministically: clock reads, random draws, I/O, goroutines and
// channels, ranges over maps, writes to package-level variables, and steps
// run in a loop under an id that does not vary (see package loomvet and
// docs/loomvet.md).
//
// Run it on packages by their patterns, standalone:
//
//	go run github.com/loom-kernel/loom/cmd/loomvet ./...
//
// or build it and let go vet drive it (go vet then runs only loomvet):
//
//	go build -o bin/loomvet github.com/loom-kernel/loom/cmd/loomvet
//	go vet -vettool=$(pwd)/bin/loomvet ./...
//
// Standalone, it exits 0 when it finds nothing, 3 when it reports a
// finding and 1 when a package does not load; under go vet, go vet reports
// the findings and exits non-zero. -help lists the checks, -json prints
// the findings as JSON, -test=false leaves test files out and -c N shows
// N lines of context. Silence a vetted line with "//loomvet:ok <reason>"
// on it or the line above.
package main

import (
	"github.com/loom-kernel/loom/loomvet"
	"golang.org/x/tools/go/analysis/singlechecker"
)

func main() { singlechecker.Main(loomvet.Analyzer) }
