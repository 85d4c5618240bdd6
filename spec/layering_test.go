package spec

import (
	"sort"
	"strings"
	"testing"
)

// pluginsPrefix is where adapters live; the kernel never depends on them
// (ADR 0043, DESIGN P8).
const pluginsPrefix = modulePath + "/plugins/"

// appPrefixes are applications, not kernel: they compose the kernel with
// adapters, so they may import plugins/. bench/ is the whole-workload
// harness that measures the kernel against a real store adapter; loomtest
// is the testing kit, imported only by tests, whose environment runs on a
// temporary SQLite file as well as on memory stores.
var appPrefixes = []string{modulePath + "/cmd/", modulePath + "/examples/", modulePath + "/bench/", modulePath + "/loomtest"}

func isPlugin(path string) bool {
	return path == strings.TrimSuffix(pluginsPrefix, "/") || strings.HasPrefix(path, pluginsPrefix)
}

func isApp(path string) bool {
	for _, p := range appPrefixes {
		if path == strings.TrimSuffix(p, "/") || strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// layeringViolations returns one line per kernel package of the module and
// plugin package it depends on, transitively; deps maps each package to its
// transitive dependencies (`go list -deps`). Plugins and apps are not kernel.
func layeringViolations(deps map[string][]string) []string {
	pkgs := make([]string, 0, len(deps))
	for p := range deps { //loom:sorted sorted below
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	var out []string
	for _, p := range pkgs {
		if !inModule(p) || isPlugin(p) || isApp(p) {
			continue
		}
		for _, d := range deps[p] {
			if isPlugin(d) {
				out = append(out, p+" depends on the adapter "+d)
			}
		}
	}
	return out
}

// TestLayeringNoKernelImportsPlugins is the layering guard of ADR 0043: no
// package of the module outside plugins/ (and the apps of appPrefixes) may
// depend, even transitively, on an adapter under plugins/. Only the build
// graph counts (`go list` Deps leave test imports out): a kernel package's
// tests may run against a real adapter.
func TestLayeringNoKernelImportsPlugins(t *testing.T) {
	deps := map[string][]string{}
	for _, p := range goList(t, "ImportPath,Deps", "./...") {
		deps[p.ImportPath] = p.Deps
	}
	for _, must := range []string{modulePath + "/event", modulePath + "/store", modulePath + "/spec"} {
		if _, ok := deps[must]; !ok {
			t.Fatalf("go list ./... did not list %s; the guard would check nothing", must)
		}
	}
	for _, v := range layeringViolations(deps) {
		t.Error(v)
	}
}

// TestLayeringGuardReportsPluginImports proves the guard can fail: a kernel
// package reaching an adapter, directly or through another package, is
// reported; apps, plugins and look-alike paths are not.
func TestLayeringGuardReportsPluginImports(t *testing.T) {
	deps := map[string][]string{
		modulePath + "/store":           {"context", modulePath + "/event", modulePath + "/plugins/sqlite", "modernc.org/sqlite"},
		modulePath + "/fold":            {modulePath + "/event", modulePath + "/internal/cache", modulePath + "/plugins/postgres/pgx"},
		modulePath + "/event":           {"encoding/json"},
		modulePath + "/pluginsfree":     {modulePath + "/pluginsx"},
		modulePath + "/cmd/loom":        {modulePath + "/plugins/sqlite"},
		modulePath + "/examples/orders": {modulePath + "/plugins/sqlite"},
		modulePath + "/plugins/sqlite":  {modulePath + "/plugins/internal/sqlutil"},
		"example.com/other":             {modulePath + "/plugins/sqlite"},
	}
	got := layeringViolations(deps)
	want := []string{
		modulePath + "/fold depends on the adapter " + modulePath + "/plugins/postgres/pgx",
		modulePath + "/store depends on the adapter " + modulePath + "/plugins/sqlite",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("layeringViolations:\n got %q\nwant %q", got, want)
	}
}
