package dispatch_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/dispatch"
)

// DispatcherSPIVersion versions the SPI's interfaces and its JSON (spec §7):
// the version and what it pins change together, so a field or a method
// added, renamed or removed without a version bump fails here.
func TestSpec7DispatcherSPIVersionPinsTheContract(t *testing.T) {
	if dispatch.DispatcherSPIVersion != "1.1.0" {
		t.Fatalf("DispatcherSPIVersion %s: update this pin together with the sets below", dispatch.DispatcherSPIVersion)
	}
	pins := []struct {
		v    any
		tags []string
	}{
		{dispatch.ExecutionPackage{}, []string{"executionId", "flowId", "input,omitempty", "principal,omitempty", "resume,omitempty"}},
		{dispatch.ResumeHint{}, []string{"recover,omitempty", "eventType,omitempty", "payload,omitempty", "credentials,omitempty"}},
		{dispatch.ExecutionResult{}, []string{"executionId", "status", "output,omitempty", "error,omitempty", "suspendedOn,omitempty", "sequence"}},
	}
	for _, p := range pins {
		typ := reflect.TypeOf(p.v)
		var got []string
		for i := range typ.NumField() {
			if f := typ.Field(i); f.IsExported() {
				got = append(got, f.Tag.Get("json"))
			}
		}
		if !slices.Equal(got, p.tags) {
			t.Errorf("%s JSON fields %v, pinned %v: bump DispatcherSPIVersion (MINOR for an optional field)", typ.Name(), got, p.tags)
		}
	}
	methods := map[reflect.Type][]string{
		reflect.TypeFor[dispatch.Dispatcher]():    {"Dispatch"},
		reflect.TypeFor[dispatch.WorkerRuntime](): {"Execute"},
	}
	want := reflect.TypeFor[func(context.Context, dispatch.ExecutionPackage) (dispatch.ExecutionResult, error)]()
	for typ, names := range methods {
		if typ.NumMethod() != len(names) {
			t.Errorf("%s has %d methods, pinned %v", typ.Name(), typ.NumMethod(), names)
		}
		for _, name := range names {
			m, ok := typ.MethodByName(name)
			if !ok || m.Type != want {
				t.Errorf("%s.%s: %v, pinned %v", typ.Name(), name, m.Type, want)
			}
		}
	}
	if strings.Count(dispatch.DispatcherSPIVersion, ".") != 2 {
		t.Fatal("DispatcherSPIVersion is not semver")
	}
}
