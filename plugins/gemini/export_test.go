package gemini

import "time"

// SetClock replaces p's clock (it dates Retry-After), for tests.
func SetClock(p *Provider, now func() time.Time) { p.now = now }
