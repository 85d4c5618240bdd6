package effect_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/loom-kernel/loom/effect"
)

func TestLookupRunsAQualifiedToolIDThroughItsFamilysEffect(t *testing.T) {
	mark := func(s string) effect.Func {
		return func(*effect.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`"` + s + `"`), nil
		}
	}
	r, err := effect.NewRegistry(map[string]effect.Func{"mcp.invoke": mark("family"), "mcp.invoke:docs/search": mark("own")})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"mcp.invoke": `"family"`, "mcp.invoke:runbooks/lookup": `"family"`, "mcp.invoke:docs/search": `"own"`} { //loom:order-independent each id on its own
		f, err := r.Lookup(id)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", id, err)
		}
		if out, _ := f(nil, nil); string(out) != want {
			t.Errorf("Lookup(%q) ran %s, want %s", id, out, want)
		}
	}
	for _, id := range []string{"mcp", "http.get:x", "mcp.invok:x"} {
		if _, err := r.Lookup(id); !errors.Is(err, effect.ErrUnknownTool) {
			t.Errorf("Lookup(%q) = %v, want ErrUnknownTool", id, err)
		}
	}
}
