package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/wire"
)

// version is the release of this binary, set when it is linked
// (go build -ldflags "-X main.version=v1.2.3"); when it is empty the
// module version from the build info is used: the tag for go install
// …@v1.2.3, a pseudo-version or "(devel)" for a build from a checkout.
var version = ""

func loomVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		// A build from a checkout: say which commit, when the build knows.
		v = "(devel)"
		var rev, dirty string
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && len(s.Value) >= 12:
				rev = s.Value[:12]
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = ", modified"
			}
		}
		if rev != "" {
			v += " " + rev + dirty
		}
	}
	return v
}

// versionInfo is what loom version prints with --json.
type versionInfo struct {
	Version            string `json:"version"`
	KernelABIVersion   string `json:"kernelAbiVersion"`
	WireABIVersion     string `json:"wireAbiVersion"`
	EventSchemaVersion string `json:"eventSchemaVersion"`
	Go                 string `json:"go"`
	Platform           string `json:"platform"`
}

func currentVersion() versionInfo {
	return versionInfo{Version: loomVersion(), KernelABIVersion: loom.KernelABIVersion, WireABIVersion: wire.Version,
		EventSchemaVersion: event.SchemaVersion, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// versionText is the two lines of loom version (and loom --version).
func versionText() string {
	v := currentVersion()
	return fmt.Sprintf("loom %s\nkernel ABI %s, wire ABI %s, event schema %s; %s %s",
		v.Version, v.KernelABIVersion, v.WireABIVersion, v.EventSchemaVersion, v.Go, v.Platform)
}

func (c *cli) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this loom's version and the contract versions it speaks",
		Long: `version prints the release of this binary (from the build: a tag for
go install …@vX.Y.Z) and the kernel ABI, wire ABI and event schema versions it
was built with; loom --version prints the same.`,
		Args: c.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.json {
				return c.printJSON(currentVersion())
			}
			_, err := fmt.Fprintln(c.stdout, versionText())
			return err
		},
	}
}
