package spec

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/wire"
)

// TestSpec9ManifestAggregatesExportedConstants: the manifest is built from
// the real constants, so it cannot drift from the code (spec §9).
func TestSpec9ManifestAggregatesExportedConstants(t *testing.T) {
	m := Manifest()
	want := KernelManifest{
		WireABIVersion:     wire.Version,
		KernelABIVersion:   loom.KernelABIVersion,
		Syscalls:           loom.KernelSyscalls,
		EventSchemaVersion: event.SchemaVersion,
		KnownEventTypes:    event.KnownTypes(),
		SPIs: SPIVersions{
			EventStore:     store.EventStoreSPIVersion,
			SnapshotStore:  store.SnapshotStoreSPIVersion,
			BranchRegistry: store.BranchRegistrySPIVersion,
			TimerStore:     store.TimerStoreSPIVersion,
			LeaseStore:     store.LeaseStoreSPIVersion,
			ContentStore:   store.ContentStoreSPIVersion,
			StatusIndex:    store.StatusIndexSPIVersion,
			Dispatcher:     dispatch.DispatcherSPIVersion,
			QueueStore:     store.QueueStoreSPIVersion,
			ArchiveStore:   store.ArchiveStoreSPIVersion,
			PrefixTrimmer:  store.PrefixTrimmerSPIVersion,
			PrefixArchiver: store.PrefixArchiverSPIVersion,
			ArchiveDeleter: store.ArchiveDeleterSPIVersion,
			ReadModelStore: store.ReadModelStoreSPIVersion,
		},
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("Manifest() = %+v, want %+v", m, want)
	}
	versions := m.Versions()
	wantVersions := map[string]string{
		ComponentKernelABI:         loom.KernelABIVersion,
		ComponentEventSchema:       event.SchemaVersion,
		ComponentEventStoreSPI:     store.EventStoreSPIVersion,
		ComponentSnapshotStoreSPI:  store.SnapshotStoreSPIVersion,
		ComponentBranchRegistrySPI: store.BranchRegistrySPIVersion,
		ComponentTimerStoreSPI:     store.TimerStoreSPIVersion,
		ComponentLeaseStoreSPI:     store.LeaseStoreSPIVersion,
		ComponentContentStoreSPI:   store.ContentStoreSPIVersion,
		ComponentStatusIndexSPI:    store.StatusIndexSPIVersion,
		ComponentDispatcherSPI:     dispatch.DispatcherSPIVersion,
		ComponentQueueStoreSPI:     store.QueueStoreSPIVersion,
		ComponentArchiveStoreSPI:   store.ArchiveStoreSPIVersion,
		ComponentPrefixTrimmerSPI:  store.PrefixTrimmerSPIVersion,
		ComponentPrefixArchiverSPI: store.PrefixArchiverSPIVersion,
		ComponentArchiveDeleterSPI: store.ArchiveDeleterSPIVersion,
		ComponentReadModelStoreSPI: store.ReadModelStoreSPIVersion,
		ComponentWireABI:           wire.Version,
	}
	if !reflect.DeepEqual(versions, wantVersions) {
		t.Fatalf("Versions() = %v, want %v", versions, wantVersions)
	}
	for c, v := range versions {
		if !semver.MatchString(v) {
			t.Errorf("%s version %q is not a semantic version", c, v)
		}
	}
}

// TestManifestJSONShape pins the JSON field names `loom kernel-manifest
// --json` prints.
func TestManifestJSONShape(t *testing.T) {
	b, err := json.Marshal(Manifest())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"wireAbiVersion", "kernelAbiVersion", "syscalls", "eventSchemaVersion", "knownEventTypes", "spis"} {
		if _, ok := got[k]; !ok {
			t.Errorf("manifest JSON lacks %q: %s", k, b)
		}
	}
	if len(got) != 6 {
		t.Errorf("manifest JSON has %d fields, want 6: %s", len(got), b)
	}
	var spis map[string]string
	if err := json.Unmarshal(got["spis"], &spis); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"eventStore":     store.EventStoreSPIVersion,
		"snapshotStore":  store.SnapshotStoreSPIVersion,
		"branchRegistry": store.BranchRegistrySPIVersion,
		"timerStore":     store.TimerStoreSPIVersion,
		"leaseStore":     store.LeaseStoreSPIVersion,
		"contentStore":   store.ContentStoreSPIVersion,
		"statusIndex":    store.StatusIndexSPIVersion,
		"dispatcher":     dispatch.DispatcherSPIVersion,
		"queueStore":     store.QueueStoreSPIVersion,
		"archiveStore":   store.ArchiveStoreSPIVersion,
		"prefixTrimmer":  store.PrefixTrimmerSPIVersion,
		"prefixArchiver": store.PrefixArchiverSPIVersion,
		"archiveDeleter": store.ArchiveDeleterSPIVersion,
		"readModelStore": store.ReadModelStoreSPIVersion,
	}
	if !reflect.DeepEqual(spis, want) {
		t.Errorf("spis = %v, want %v", spis, want)
	}
}

func TestManifestReturnsAFreshValue(t *testing.T) {
	m := Manifest()
	m.KnownEventTypes[0] = "MUTATED"
	if Manifest().KnownEventTypes[0] == "MUTATED" {
		t.Fatal("Manifest() shares its type list between calls")
	}
}
