package spec_test

import (
	"fmt"

	"github.com/loom-kernel/loom/spec"
)

func ExampleManifest() {
	m := spec.Manifest()
	fmt.Println("event schema", m.EventSchemaVersion)
	fmt.Println("event store SPI", m.SPIs.EventStore)
	// Output:
	// event schema 1.26.0
	// event store SPI 1.0.0
}

func ExampleCheckCompatibility() {
	for _, m := range spec.CheckCompatibility(map[string]string{
		spec.ComponentEventSchema:   "2.0.0",
		spec.ComponentEventStoreSPI: "1.4.0",
	}) {
		fmt.Println(m)
	}
	// Output: eventSchema 2.0.0: major version differs (kernel has 1.26.0)
}
