// Package maporder holds the cases of the map-order check.
package maporder

import (
	"maps"
	"slices"

	"github.com/loom-kernel/loom"
)

var Prices = loom.NewFlow("prices", func(ctx *loom.Context, prices map[string]int) ([]string, error) {
	var out []string
	for name := range prices { // want `range over a map in flow code: its order changes from run to run.*: range over slices.Sorted\(maps.Keys\(m\)\), or say why the order cannot matter with //loomvet:ok <reason>`
		out = append(out, name)
	}
	for name, p := range prices { // want `range over a map in flow code`
		_, _ = name, p
	}
	for name := range maps.Keys(prices) { // want `range over a map in flow code`
		out = append(out, name)
	}
	for p := range maps.Values(prices) { // want `range over a map in flow code`
		_ = p
	}
	total := 0
	for _, p := range prices { //loom:sorted // want `range over a map in flow code`
		total += p
	}

	// In order, counting only, or vetted.
	for _, name := range slices.Sorted(maps.Keys(prices)) {
		out = append(out, name)
	}
	n := 0
	for range prices {
		n++
	}
	for i, s := range out {
		_, _ = i, s
	}
	for _, p := range prices { //loomvet:ok a sum does not depend on the order
		total += p
	}
	//loomvet:ok a sum does not depend on the order
	for _, p := range prices {
		total += p
	}
	for _, p := range prices { //loom:order-independent a sum
		total += p
	}
	return out, nil
})
