package store

import "testing"

// readModelPins holds the digest of the method set each
// ReadModelStoreSPIVersion pins, as pinnedDigests does for the other SPIs.
var readModelPins = map[string]string{
	"1.0.0": "465984a73f32e0dbb17e4c9526cadf69e51b4275003dc9b0cbd725b4ec5a695a",
}

func TestReadModelStoreSPIVersionPinsMethodSet(t *testing.T) {
	set := methodSet((*ReadModelStore)(nil))
	if want, ok := readModelPins[ReadModelStoreSPIVersion]; !ok || want != digest(set) {
		t.Errorf("ReadModelStore: the method set (digest %s) is not the one version %s pins: bump "+
			"ReadModelStoreSPIVersion and record the digest together\n%s", digest(set), ReadModelStoreSPIVersion, set)
	}
}
