package memstore_test

import (
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

func TestReadModelStoreConformance(t *testing.T) {
	storetest.RunReadModelStore(t, storetest.ReadModelStoreFactory{
		New: func(*testing.T) store.ReadModelStore { return memstore.NewReadModelStore() },
	})
}

func TestNewSetHasReadModels(t *testing.T) {
	if _, ok := memstore.NewSet().ReadModels.(*memstore.ReadModelStore); !ok {
		t.Fatal("memstore.NewSet has no ReadModelStore")
	}
}
