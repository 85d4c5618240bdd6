package spec

import (
	"reflect"
	"testing"

	"github.com/loom-kernel/loom/event"
)

// TestSpec9CompatibleIffSameMajor is the §9 rule on synthetic versions,
// including a 0.x and a 2.x component.
func TestSpec9CompatibleIffSameMajor(t *testing.T) {
	supported := map[string]string{"a": "1.26.0", "b": "0.4.1", "c": "2.0.0"}
	for _, tc := range []struct {
		name     string
		declared map[string]string
		want     []Mismatch
	}{
		{"nothing declared", nil, nil},
		{"identical", map[string]string{"a": "1.26.0", "b": "0.4.1", "c": "2.0.0"}, nil},
		{"older and newer minors", map[string]string{"a": "1.0.0", "b": "0.9.9", "c": "2.7.3"}, nil},
		{"pre-release and build", map[string]string{"a": "1.27.0-rc.1", "c": "2.0.1+sha.5114f85"}, nil},
		{"major ahead", map[string]string{"a": "2.0.0"},
			[]Mismatch{{Component: "a", Declared: "2.0.0", Supported: "1.26.0", Reason: "major version differs"}}},
		{"major behind", map[string]string{"c": "1.99.0"},
			[]Mismatch{{Component: "c", Declared: "1.99.0", Supported: "2.0.0", Reason: "major version differs"}}},
		{"zero major", map[string]string{"b": "1.4.1"},
			[]Mismatch{{Component: "b", Declared: "1.4.1", Supported: "0.4.1", Reason: "major version differs"}}},
		{"prefix is not a major", map[string]string{"a": "11.0.0"},
			[]Mismatch{{Component: "a", Declared: "11.0.0", Supported: "1.26.0", Reason: "major version differs"}}},
		{"unknown component", map[string]string{"zz": "1.0.0"},
			[]Mismatch{{Component: "zz", Declared: "1.0.0", Reason: "unknown component"}}},
		{"sorted by component", map[string]string{"c": "3.0.0", "zz": "1.0.0", "a": "2.0.0"}, []Mismatch{
			{Component: "a", Declared: "2.0.0", Supported: "1.26.0", Reason: "major version differs"},
			{Component: "c", Declared: "3.0.0", Supported: "2.0.0", Reason: "major version differs"},
			{Component: "zz", Declared: "1.0.0", Reason: "unknown component"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkAgainst(supported, tc.declared); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("checkAgainst(%v)\n got %+v\nwant %+v", tc.declared, got, tc.want)
			}
		})
	}
}

func TestCheckCompatibilityRefusesMalformedVersions(t *testing.T) {
	for _, v := range []string{"", "1", "1.26", "v1.26.0", "01.2.3", "1.02.3", "1.2.3.4", "1.2.3-", "1.2.3+", " 1.2.3", "1.2.x", "1.2.3-rc..1"} {
		got := checkAgainst(map[string]string{"a": "1.0.0"}, map[string]string{"a": v})
		want := []Mismatch{{Component: "a", Declared: v, Supported: "1.0.0", Reason: "not a semantic version"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("declared %q: got %+v, want %+v", v, got, want)
		}
	}
}

func TestCheckCompatibilityAgainstThisKernel(t *testing.T) {
	if got := CheckCompatibility(Manifest().Versions()); got != nil {
		t.Fatalf("the kernel's own versions mismatch: %+v", got)
	}
	got := CheckCompatibility(map[string]string{ComponentEventSchema: "2.0.0"})
	want := []Mismatch{{Component: ComponentEventSchema, Declared: "2.0.0", Supported: event.SchemaVersion, Reason: "major version differs"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestMismatchString(t *testing.T) {
	m := Mismatch{Component: "eventSchema", Declared: "2.0.0", Supported: "1.26.0", Reason: "major version differs"}
	if got, want := m.String(), "eventSchema 2.0.0: major version differs (kernel has 1.26.0)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	m = Mismatch{Component: "x", Declared: "1.0.0", Reason: "unknown component"}
	if got, want := m.String(), "x 1.0.0: unknown component"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
