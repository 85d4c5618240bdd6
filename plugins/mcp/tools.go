package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

// Tool is one tool of an MCP server as listed, with the pin a call of it
// carries.
type Tool struct {
	// Server is the name of the server (ServerConfig.Name).
	Server string
	// Name is the tool's name on the server.
	Name string
	// Description is the server's description of the tool.
	Description string
	// InputSchema is the JSON Schema of its arguments, as listed.
	InputSchema json.RawMessage
	// SchemaHash pins InputSchema: event.SHA256 of its canonical JSON
	// ("sha256:<hex>"). A call carries it, and fails on schemaDrift when the
	// server's current schema hashes otherwise.
	SchemaHash string
}

// ID is the tool's effect id, "mcp.invoke:<server>/<tool>": what a grant or
// a policy names to allow this one tool.
func (t Tool) ID() string { return ToolID(t.Server, t.Name) }

// ToolID is the effect id of tool on server: "mcp.invoke:<server>/<tool>".
func ToolID(server, tool string) string { return EffectName + ":" + server + "/" + tool }

// SchemaHash returns the pin of an input schema: event.SHA256 of its
// canonical JSON. It fails on bytes that are not JSON.
func SchemaHash(inputSchema json.RawMessage) (string, error) {
	canon, err := event.Canonical(inputSchema)
	if err != nil {
		return "", fmt.Errorf("mcp: hashing an input schema: %w", err)
	}
	return event.SHA256(canon), nil
}

// Tools lists the server's tools, sorted by name, each with its schema pin.
// It always asks the server (and refreshes the listing calls are verified
// against). A listing longer than MaxTools, or a schema that is not JSON,
// fails it.
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	listing, err := c.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Tool, 0, len(listing))
	for _, t := range listing { //loom:sorted sorted below
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Tool returns the tool named name as the server lists it now, or
// ErrToolNotFound.
func (c *Client) Tool(ctx context.Context, name string) (Tool, error) {
	listing, err := c.list(ctx)
	if err != nil {
		return Tool{}, err
	}
	t, ok := listing[name]
	if !ok {
		return Tool{}, fmt.Errorf("%w: %q on server %q", ErrToolNotFound, name, c.name)
	}
	return t, nil
}

// list reads the whole listing from the server and caches it.
func (c *Client) list(ctx context.Context) (map[string]Tool, error) {
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	listing := map[string]Tool{}
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp: listing the tools of server %q: %w", c.name, err)
		}
		if len(listing) == MaxTools {
			return nil, fmt.Errorf("mcp: server %q lists more than %d tools", c.name, MaxTools)
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("mcp: server %q: tool %q: encoding its input schema: %w", c.name, t.Name, err)
		}
		hash, err := SchemaHash(schema)
		if err != nil {
			return nil, fmt.Errorf("mcp: server %q: tool %q: %w", c.name, t.Name, err)
		}
		listing[t.Name] = Tool{Server: c.name, Name: t.Name, Description: t.Description, InputSchema: schema, SchemaHash: hash}
	}
	c.mu.Lock()
	// A notification that arrived while listing leaves the cache stale.
	if !c.listed || gen >= c.listGen {
		c.tools, c.listGen, c.listed = listing, gen, true
	}
	c.mu.Unlock()
	return listing, nil
}

// cached returns the cached entry of name and whether the cache may be
// trusted without asking the server: it holds a listing, the server
// promised list-changed notifications, and none arrived since.
func (c *Client) cached(name string) (Tool, bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tools[name]
	return t, ok, c.listed && c.notifies && c.listGen == c.gen
}

// verify checks that tool still exists on the server with the pinned
// schema: from the cache when it is fresh and agrees, otherwise from a new
// listing. It fails typed on ChannelToolNotFound or ChannelSchemaDrift, and
// untyped when the listing cannot be read.
func (c *Client) verify(ctx context.Context, tool, pinned string) error {
	if t, ok, fresh := c.cached(tool); fresh && ok && t.SchemaHash == pinned {
		return nil
	}
	return c.verifyListed(ctx, tool, pinned)
}

// verifyListed is verify against a new listing.
func (c *Client) verifyListed(ctx context.Context, tool, pinned string) error {
	listing, err := c.list(ctx)
	if err != nil {
		return err
	}
	t, ok := listing[tool]
	if !ok {
		return loom.Fail(ChannelToolNotFound, ToolNotFound{Server: c.name, Tool: tool})
	}
	if t.SchemaHash != pinned {
		return loom.Fail(ChannelSchemaDrift, SchemaDrift{Server: c.name, Tool: tool, Pinned: pinned, Current: t.SchemaHash})
	}
	return nil
}
