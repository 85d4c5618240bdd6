package llm

import (
	"fmt"
	"strconv"

	"github.com/loom-kernel/loom"
)

// Candidate is a model a call may go to, and the provider serving it.
type Candidate struct {
	Provider Provider
	Model    string
}

func (c Candidate) String() string { return c.Provider.Name() + "/" + c.Model }

// Routed is the recorded routing decision: which candidate was picked and
// why.
type Routed struct {
	Index    int    `json:"index"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Reason   string `json:"reason,omitempty"`
}

// Route picks the candidate a call goes to, as a recorded decision (P9)
// under id: the first run calls rule — which may read anything (a cost
// model, a load figure, a classifier) — and records its pick; every replay
// gets the same candidate without calling rule. A rule returning an index
// outside cands fails and records nothing.
func Route(ctx *loom.Context, id string, cands []Candidate, req Request, rule func(Request) (index int, reason string)) (Candidate, error) {
	if len(cands) == 0 {
		return Candidate{}, fmt.Errorf("llm: route %q: no candidates", id)
	}
	r, err := loom.Decide(ctx, id, func() (Routed, error) {
		i, reason := rule(req)
		if i < 0 || i >= len(cands) {
			return Routed{}, fmt.Errorf("llm: route %q: the rule picked candidate %d of %d", id, i, len(cands))
		}
		return Routed{Index: i, Provider: cands[i].Provider.Name(), Model: cands[i].Model, Reason: reason}, nil
	})
	if err != nil {
		return Candidate{}, err
	}
	if r.Index < 0 || r.Index >= len(cands) || cands[r.Index].Provider.Name() != r.Provider {
		return Candidate{}, fmt.Errorf("llm: route %q: the log routed to %s/%s (candidate %d), which this code does not offer", id, r.Provider, r.Model, r.Index)
	}
	c := cands[r.Index]
	c.Model = r.Model
	return c, nil
}

// FellBack is the recorded decision to move from one candidate to the next.
type FellBack struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind Kind   `json:"kind"`
}

// DefaultFallbackKinds are the failures Fallback moves on after: the
// model is rate limited or unavailable once its retries are spent.
var DefaultFallbackKinds = []Kind{KindRateLimited, KindUnavailable}

// Fallback calls the candidates in order until one answers: candidate 0
// under step id id, candidate i under id#fallback:i, each a Complete with
// req.Model set to the candidate's model. When a candidate fails on one of
// the kinds (DefaultFallbackKinds when none are given) after its retries,
// the move to the next one is recorded as a decision (id/fallback:i, a
// FellBack) and the next candidate is called; any other failure, or the
// last candidate's, is returned. On replay every failed candidate's typed
// failure and every decision is served from the log: no provider is called
// for a candidate the log holds.
func Fallback(ctx *loom.Context, id string, cands []Candidate, req Request, kinds []Kind, opts ...CallOption) (Response, Candidate, error) {
	if len(cands) == 0 {
		return Response{}, Candidate{}, fmt.Errorf("llm: fallback %q: no candidates", id)
	}
	if kinds == nil {
		kinds = DefaultFallbackKinds
	}
	for i, c := range cands {
		step := id
		if i > 0 {
			step = id + "#fallback:" + strconv.Itoa(i)
		}
		r := req
		r.Model = c.Model
		resp, err := Complete(ctx, step, c.Provider, r, opts...)
		if err == nil {
			return resp, c, nil
		}
		f, typed := FailureOf(err)
		if !typed || i == len(cands)-1 || !kindIn(f.Kind, kinds) {
			return Response{}, c, err
		}
		next := cands[i+1]
		if _, err := loom.Decide(ctx, id+"/fallback:"+strconv.Itoa(i+1), func() (FellBack, error) {
			return FellBack{From: c.String(), To: next.String(), Kind: f.Kind}, nil
		}); err != nil {
			return Response{}, c, err
		}
	}
	panic("unreachable")
}

func kindIn(k Kind, kinds []Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}
