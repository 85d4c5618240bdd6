package llm

import (
	"sort"
	"strings"
)

// Price is what a model charges, in US dollars per million tokens.
type Price struct {
	InputPerMTok      float64 `json:"inputPerMTok"`
	OutputPerMTok     float64 `json:"outputPerMTok"`
	CacheReadPerMTok  float64 `json:"cacheReadPerMTok,omitempty"`
	CacheWritePerMTok float64 `json:"cacheWritePerMTok,omitempty"`
}

// Prices is a price table keyed by "<provider>/<model>" or "<model>"; a
// key ending in "*" prices every model with that prefix (dated snapshots of
// one model). Lookup takes the exact provider key, then the exact model,
// then the longest matching prefix.
type Prices map[string]Price

// DefaultPrices are list prices of common models as their providers
// published them when this table was written. They are a default, not a
// bill: give Complete your contract's table with WithPrices (or extend
// this one with Merge). A model missing from the table records no costUsd
// (no false zeros), only its tokens.
var DefaultPrices = Prices{
	"anthropic/claude-opus-4*":   {InputPerMTok: 15, OutputPerMTok: 75, CacheReadPerMTok: 1.5, CacheWritePerMTok: 18.75},
	"anthropic/claude-sonnet-4*": {InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75},
	"anthropic/claude-haiku-4*":  {InputPerMTok: 1, OutputPerMTok: 5, CacheReadPerMTok: 0.1, CacheWritePerMTok: 1.25},
	"openai/gpt-4.1*":            {InputPerMTok: 2, OutputPerMTok: 8, CacheReadPerMTok: 0.5},
	"openai/gpt-4.1-mini*":       {InputPerMTok: 0.4, OutputPerMTok: 1.6, CacheReadPerMTok: 0.1},
	"openai/gpt-4o*":             {InputPerMTok: 2.5, OutputPerMTok: 10, CacheReadPerMTok: 1.25},
	"openai/gpt-4o-mini*":        {InputPerMTok: 0.15, OutputPerMTok: 0.6, CacheReadPerMTok: 0.075},
	"gemini/gemini-2.5-pro*":     {InputPerMTok: 1.25, OutputPerMTok: 10, CacheReadPerMTok: 0.31},
	"gemini/gemini-2.5-flash*":   {InputPerMTok: 0.3, OutputPerMTok: 2.5, CacheReadPerMTok: 0.075},
}

// Merge returns a new table with p's entries overridden by more's.
func (p Prices) Merge(more Prices) Prices {
	out := make(Prices, len(p)+len(more))
	for k, v := range p { //loom:order-independent map into map
		out[k] = v
	}
	for k, v := range more { //loom:order-independent map into map
		out[k] = v
	}
	return out
}

// Lookup finds the price of model as served by provider.
func (p Prices) Lookup(provider, model string) (Price, bool) {
	if v, ok := p[provider+"/"+model]; ok {
		return v, true
	}
	if v, ok := p[model]; ok {
		return v, true
	}
	best, found := "", false
	keys := make([]string, 0, len(p))
	for k := range p { //loom:sorted sorted below
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		prefix, ok := strings.CutSuffix(k, "*")
		if !ok || len(prefix) <= len(best) {
			continue
		}
		if strings.HasPrefix(provider+"/"+model, prefix) || strings.HasPrefix(model, prefix) {
			best, found = prefix, true
		}
	}
	if !found {
		return Price{}, false
	}
	return p[best+"*"], true
}

// Cost prices usage of model as served by provider, in US dollars.
func (p Prices) Cost(provider, model string, u Usage) (float64, bool) {
	price, ok := p.Lookup(provider, model)
	if !ok {
		return 0, false
	}
	cost := float64(u.InputTokens)*price.InputPerMTok + float64(u.OutputTokens)*price.OutputPerMTok +
		float64(u.CacheReadTokens)*price.CacheReadPerMTok + float64(u.CacheWriteTokens)*price.CacheWritePerMTok
	return cost / 1e6, true
}
