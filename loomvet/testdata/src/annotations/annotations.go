// Package annotations holds the cases of //loomvet:ok.
package annotations

import (
	"time"

	"github.com/loom-kernel/loom"
)

var Annotated = loom.NewFlow("annotated", func(ctx *loom.Context, _ int) (int64, error) {
	a := time.Now().Unix() //loomvet:ok logged only: it decides no path
	//loomvet:ok logged only: it decides no path
	b := time.Now().Unix()
	c := time.Now().Unix() //loomvet:ok // want `^//loomvet:ok needs a reason: say why the line is deterministic \(//loomvet:ok <reason>\); without one it silences nothing$` `time.Now in flow code`
	//loomvet:ok // want `//loomvet:ok needs a reason`
	d := time.Now().Unix() // want `time.Now in flow code`
	//loomvet:ok covers the next line only

	e := time.Now().Unix() // want `time.Now in flow code`
	//loomvet:okay is not the annotation
	f := time.Now().Unix() // want `time.Now in flow code`
	/* loomvet:ok a block comment is not the annotation */
	g := time.Now().Unix() // want `time.Now in flow code`
	return a + b + c + d + e + f + g, nil
})

// An annotation is read wherever it is, flow code or not:
//
//loomvet:ok // want `//loomvet:ok needs a reason`
func elsewhere() {}
