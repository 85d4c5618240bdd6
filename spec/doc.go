// Package spec is the machine-readable projection of the kernel
// specification (spec §9): Manifest aggregates the kernel's contract
// versions from the real exported constants, so it can never drift from the
// code, and CheckCompatibility gates a deployment's declared versions on
// them (compatible iff the major versions agree).
//
// Its tests are the structural guards of the module: the layering guard
// (no kernel package depends on an adapter under plugins/, ADR 0043) and the
// pure-core guard (event and fold import no ambient input and never leak map
// iteration order).
package spec
