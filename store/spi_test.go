package store

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// methodSet renders the methods of interface types, sorted, with their
// signatures: the contract an SPI version pins.
func methodSet(ifaces ...any) string {
	var lines []string
	for _, p := range ifaces {
		t := reflect.TypeOf(p).Elem()
		for i := range t.NumMethod() {
			m := t.Method(i)
			lines = append(lines, t.Name()+"."+m.Name+" "+m.Type.String())
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// pinned lists each SPI's version and interfaces (required and optional);
// pinnedDigests holds the digest of the method set each version pins. A
// method change without a version bump, or a bump without recording the new
// digest, fails.
var pinned = map[string]struct {
	version string
	ifaces  []any
}{
	"EventStore": {EventStoreSPIVersion,
		[]any{(*EventStore)(nil), (*RangeReader)(nil), (*Subscriber)(nil), (*PrefixCopier)(nil), (*ExecutionDeleter)(nil), (*Fencer)(nil)}},
	"SnapshotStore": {SnapshotStoreSPIVersion,
		[]any{(*SnapshotStore)(nil), (*SnapshotLister)(nil), (*SnapshotPruner)(nil), (*SnapshotDeleter)(nil)}},
	"BranchRegistry":   {BranchRegistrySPIVersion, []any{(*BranchRegistry)(nil)}},
	"TimerStore":       {TimerStoreSPIVersion, []any{(*TimerStore)(nil), (*TimerClaimer)(nil)}},
	"QueueStore":       {QueueStoreSPIVersion, []any{(*QueueStore)(nil)}},
	"LeaseStore":       {LeaseStoreSPIVersion, []any{(*LeaseStore)(nil)}},
	"ContentStore":     {ContentStoreSPIVersion, []any{(*ContentStore)(nil), (*ContentDeleter)(nil)}},
	"StatusIndex":      {StatusIndexSPIVersion, []any{(*StatusIndex)(nil)}},
	"ExecutionCatalog": {ExecutionCatalogSPIVersion, []any{(*ExecutionCatalog)(nil)}},
}

var pinnedDigests = map[string]string{
	"EventStore@1.0.0":       "6b090377363e44102e4bc1c796c385343b7d0a4e03e93763b0904956285111b9",
	"SnapshotStore@1.0.0":    "6c167032236d0eb55992c125579cbd78478a2686923f5fcf2f64a339ab9cb451",
	"BranchRegistry@1.0.0":   "eee6c3487f9a0783d92a0b204c99dfc44d3ae5e02506dd27d0f1c855f7cd95b9",
	"LeaseStore@1.0.0":       "36d620ac881656604a878dfe32359eb1fd6a0f3fa8da601ba4c1bfe03ec2c2f4",
	"TimerStore@1.0.0":       "f9fec18017e3e1a1de729dcee188b5be7888a8e21899a7af9ff8cfdb3ae4bd10",
	"TimerStore@1.1.0":       "3dd2e08453d8a9e2a792419abdfaca21564a809a3fd4cf77e233d963150c0c0a",
	"QueueStore@1.0.0":       "476bf7b721cdc8e46e2e9a973b089a4a2d960479444bbd22a488ac7d53e5996c",
	"ContentStore@1.0.0":     "e99c7325d4f9b021db16b807c3ee0571750af35e2abaec7755c5e0a9f4e1c873",
	"StatusIndex@1.0.0":      "b4fc77e7eebb8eb3424f1f51dde339f79b19f863e737c3aebdc9d57deb86bb78",
	"ExecutionCatalog@1.0.0": "31d373ef23498a4b1d3da56068b3725e3b2b8492ae36d398c8dd6d2617f6d496",
}

func TestSPIVersionsPinMethodSets(t *testing.T) {
	for name, p := range pinned {
		got := digest(methodSet(p.ifaces...))
		key := name + "@" + p.version
		if want, ok := pinnedDigests[key]; !ok || want != got {
			t.Errorf("%s: the method set (digest %s) is not the one version %s pins: bump the SPI version "+
				"(MINOR for a new optional interface, MAJOR for a changed contract) and record the digest together\n%s",
				name, got, p.version, methodSet(p.ifaces...))
		}
	}
}
