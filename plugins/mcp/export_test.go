package mcp

// ToolsChanged returns a channel closed when c next receives
// notifications/tools/list_changed: tests wait on it instead of sleeping.
func ToolsChanged(c *Client) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}
