package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/spec"
	"github.com/loom-kernel/loom/wire"
)

// componentWire is the compat name of the wire ABI.
const componentWire = spec.ComponentWireABI

func (c *cli) manifestCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kernel-manifest",
		Short: "Print the kernel's contract versions and the sets they version",
		Long: `kernel-manifest prints spec.Manifest() — the kernel ABI version and its
syscalls, the event schema version and its event types, the storage SPI
versions — and the wire ABI version, built from the constants of this binary.`,
		Args: c.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			m := spec.Manifest()
			if c.json {
				return c.printJSON(m)
			}
			t := newTable(c.stdout, "COMPONENT", "VERSION", "PINS")
			t.row(spec.ComponentKernelABI, m.KernelABIVersion, fmt.Sprintf("%d syscalls: %s", len(m.Syscalls), strings.Join(m.Syscalls, ", ")))
			t.row(spec.ComponentEventSchema, m.EventSchemaVersion, fmt.Sprintf("%d event types", len(m.KnownEventTypes)))
			t.row(componentWire, m.WireABIVersion, fmt.Sprintf("%d methods: %s", len(wire.Methods()), strings.Join(wire.Methods(), ", ")))
			versions := m.Versions()
			for _, name := range slices.Sorted(maps.Keys(versions)) {
				if name != spec.ComponentKernelABI && name != spec.ComponentEventSchema && name != componentWire {
					t.row(name, versions[name], "")
				}
			}
			return t.flush()
		},
	}
}

func (c *cli) compatCommand() *cobra.Command {
	var (
		abi, schema, wireV string
		spis               []string
	)
	cmd := &cobra.Command{
		Use:   "compat --abi V [--schema V] [--wire V] [--spi name=V]…",
		Short: "Check a deployment's declared versions against this kernel (exit 3 on a mismatch)",
		Long: `compat checks declared versions with spec.CheckCompatibility (spec §9): two
versions are compatible iff they share a major version. --spi takes any other
component of the manifest by name, e.g. --spi eventStoreSpi=1.0.0. It exits 0
when every declared version is compatible and 3 otherwise — a deployment gate.`,
		Args: c.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			declared := map[string]string{}
			if abi != "" {
				declared[spec.ComponentKernelABI] = abi
			}
			if schema != "" {
				declared[spec.ComponentEventSchema] = schema
			}
			for _, kv := range spis {
				name, v, ok := strings.Cut(kv, "=")
				if !ok || name == "" || v == "" {
					return usagef("--spi takes name=version, for example eventStoreSpi=1.0.0; got %q", kv)
				}
				declared[name] = v
			}
			if len(declared) == 0 && wireV == "" {
				return usagef("declare at least one version: --abi, --schema, --wire or --spi name=version")
			}
			mismatches := spec.CheckCompatibility(declared)
			if wireV != "" {
				if m, ok := checkWire(wireV); !ok {
					mismatches = append(mismatches, m)
				}
			}
			if c.json {
				if mismatches == nil {
					mismatches = []spec.Mismatch{}
				}
				if err := c.printJSON(struct {
					Compatible bool            `json:"compatible"`
					Mismatches []spec.Mismatch `json:"mismatches"`
				}{len(mismatches) == 0, mismatches}); err != nil {
					return err
				}
			} else if len(mismatches) == 0 {
				fmt.Fprintln(c.stdout, "compatible: every declared version shares its major version with this kernel")
			} else {
				for _, m := range mismatches {
					fmt.Fprintln(c.stdout, "incompatible:", m.String())
				}
			}
			if len(mismatches) > 0 {
				return checkFailedf("%d declared version(s) are incompatible with this kernel (loom kernel-manifest lists its versions)", len(mismatches))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&abi, "abi", "", "the kernel ABI `version` the deployment was built for")
	cmd.Flags().StringVar(&schema, "schema", "", "the event schema `version` its logs were written under")
	cmd.Flags().StringVar(&wireV, "wire", "", "the wire ABI `version` its clients speak")
	cmd.Flags().StringArrayVar(&spis, "spi", nil, "another component's version, as `name=version` (repeatable)")
	return cmd
}

// checkWire applies spec's rule (same major version) to the wire ABI.
func checkWire(declared string) (spec.Mismatch, bool) {
	m := spec.Mismatch{Component: componentWire, Declared: declared, Supported: wire.Version}
	major := func(v string) (int, bool) {
		head, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
		n, err := strconv.Atoi(head)
		return n, err == nil && strings.Count(v, ".") == 2
	}
	d, okD := major(declared)
	k, _ := major(wire.Version)
	switch {
	case !okD:
		m.Reason = "not a semantic version"
	case d != k:
		m.Reason = "major version differs"
	default:
		return m, true
	}
	return m, false
}
