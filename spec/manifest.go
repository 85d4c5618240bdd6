package spec

import (
	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/wire"
)

// Component names: the keys of KernelManifest.Versions and of the map
// CheckCompatibility takes.
const (
	ComponentKernelABI         = "kernelAbi"
	ComponentEventSchema       = "eventSchema"
	ComponentEventStoreSPI     = "eventStoreSpi"
	ComponentSnapshotStoreSPI  = "snapshotStoreSpi"
	ComponentBranchRegistrySPI = "branchRegistrySpi"
	ComponentTimerStoreSPI     = "timerStoreSpi"
	ComponentLeaseStoreSPI     = "leaseStoreSpi"
	ComponentContentStoreSPI   = "contentStoreSpi"
	ComponentStatusIndexSPI    = "statusIndexSpi"
	ComponentDispatcherSPI     = "dispatcherSpi"
	ComponentQueueStoreSPI     = "queueStoreSpi"
	ComponentArchiveStoreSPI   = "archiveStoreSpi"
	ComponentPrefixTrimmerSPI  = "prefixTrimmerSpi"
	ComponentPrefixArchiverSPI = "prefixArchiverSpi"
	ComponentArchiveDeleterSPI = "archiveDeleterSpi"
	ComponentReadModelStoreSPI = "readModelStoreSpi"
	ComponentWireABI           = "wireAbi"
)

// KernelManifest lists the kernel's contract versions and the sets they
// version (spec §9). It is what `loom kernel-manifest --json` prints.
type KernelManifest struct {
	// WireABIVersion is wire.Version: the JSON-RPC projection of the ABI.
	WireABIVersion string `json:"wireAbiVersion"`
	// KernelABIVersion is loom.KernelABIVersion (spec §2, K1).
	KernelABIVersion string `json:"kernelAbiVersion"`
	// Syscalls is loom.KernelSyscalls: the set the kernel ABI pins.
	Syscalls []string `json:"syscalls"`
	// EventSchemaVersion is event.SchemaVersion (spec §4, K5).
	EventSchemaVersion string `json:"eventSchemaVersion"`
	// KnownEventTypes is event.KnownTypes(), sorted: the set the schema
	// version pins.
	KnownEventTypes []string `json:"knownEventTypes"`
	// SPIs holds the storage SPI versions (spec §7).
	SPIs SPIVersions `json:"spis"`
}

// SPIVersions are the store package's SPI version constants.
type SPIVersions struct {
	EventStore     string `json:"eventStore"`
	SnapshotStore  string `json:"snapshotStore"`
	BranchRegistry string `json:"branchRegistry"`
	TimerStore     string `json:"timerStore"`
	LeaseStore     string `json:"leaseStore"`
	ContentStore   string `json:"contentStore"`
	StatusIndex    string `json:"statusIndex"`
	Dispatcher     string `json:"dispatcher"`
	QueueStore     string `json:"queueStore"`
	ArchiveStore   string `json:"archiveStore"`
	PrefixTrimmer  string `json:"prefixTrimmer"`
	PrefixArchiver string `json:"prefixArchiver"`
	ArchiveDeleter string `json:"archiveDeleter"`
	ReadModelStore string `json:"readModelStore"`
}

// Manifest returns the manifest of this kernel, built from the exported
// constants themselves. Each call returns a fresh value the caller may
// modify.
func Manifest() KernelManifest {
	return KernelManifest{
		KernelABIVersion:   loom.KernelABIVersion,
		Syscalls:           append([]string(nil), loom.KernelSyscalls...),
		EventSchemaVersion: event.SchemaVersion,
		KnownEventTypes:    event.KnownTypes(),
		WireABIVersion:     wire.Version,
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
}

// Versions returns the manifest's versions keyed by component name
// (ComponentEventSchema, …), the form CheckCompatibility compares against.
func (m KernelManifest) Versions() map[string]string {
	return map[string]string{
		ComponentKernelABI:         m.KernelABIVersion,
		ComponentEventSchema:       m.EventSchemaVersion,
		ComponentEventStoreSPI:     m.SPIs.EventStore,
		ComponentSnapshotStoreSPI:  m.SPIs.SnapshotStore,
		ComponentBranchRegistrySPI: m.SPIs.BranchRegistry,
		ComponentTimerStoreSPI:     m.SPIs.TimerStore,
		ComponentLeaseStoreSPI:     m.SPIs.LeaseStore,
		ComponentContentStoreSPI:   m.SPIs.ContentStore,
		ComponentStatusIndexSPI:    m.SPIs.StatusIndex,
		ComponentDispatcherSPI:     m.SPIs.Dispatcher,
		ComponentQueueStoreSPI:     m.SPIs.QueueStore,
		ComponentArchiveStoreSPI:   m.SPIs.ArchiveStore,
		ComponentPrefixTrimmerSPI:  m.SPIs.PrefixTrimmer,
		ComponentPrefixArchiverSPI: m.SPIs.PrefixArchiver,
		ComponentArchiveDeleterSPI: m.SPIs.ArchiveDeleter,
		ComponentReadModelStoreSPI: m.SPIs.ReadModelStore,
		ComponentWireABI:           m.WireABIVersion,
	}
}
