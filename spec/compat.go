package spec

import (
	"regexp"
	"sort"
	"strings"
)

// Mismatch is one declared version CheckCompatibility refuses.
type Mismatch struct {
	// Component is the declared component name.
	Component string `json:"component"`
	// Declared is the version the deployment declared.
	Declared string `json:"declared"`
	// Supported is this kernel's version of the component, "" when the
	// component is unknown.
	Supported string `json:"supported,omitempty"`
	// Reason says why: "major version differs", "not a semantic version"
	// or "unknown component".
	Reason string `json:"reason"`
}

// String renders the mismatch for a person, e.g. "eventSchema 2.0.0: major
// version differs (kernel has 1.26.0)".
func (m Mismatch) String() string {
	s := m.Component + " " + m.Declared + ": " + m.Reason
	if m.Supported != "" {
		s += " (kernel has " + m.Supported + ")"
	}
	return s
}

// semver is MAJOR.MINOR.PATCH with an optional pre-release and build, as
// semver.org writes it (no leading zeros, no "v" prefix).
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
	`(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// CheckCompatibility validates a deployment's declared versions, keyed by
// component name (ComponentEventSchema, …), against this kernel's Manifest
// (spec §9): two versions are compatible iff they share a major version. It
// returns the mismatches sorted by component, none when every declared
// version is compatible; a component the deployment does not declare is not
// checked, and a component this kernel does not know is a mismatch.
func CheckCompatibility(declared map[string]string) []Mismatch {
	return checkAgainst(Manifest().Versions(), declared)
}

func checkAgainst(supported, declared map[string]string) []Mismatch {
	components := make([]string, 0, len(declared))
	for c := range declared { //loom:sorted components are sorted before use
		components = append(components, c)
	}
	sort.Strings(components)
	var out []Mismatch
	for _, c := range components {
		d := declared[c]
		have, known := supported[c]
		switch {
		case !known:
			out = append(out, Mismatch{Component: c, Declared: d, Reason: "unknown component"})
		case !semver.MatchString(d):
			out = append(out, Mismatch{Component: c, Declared: d, Supported: have, Reason: "not a semantic version"})
		case major(d) != major(have):
			out = append(out, Mismatch{Component: c, Declared: d, Supported: have, Reason: "major version differs"})
		}
	}
	return out
}

func major(v string) string {
	m, _, _ := strings.Cut(v, ".")
	return m
}
