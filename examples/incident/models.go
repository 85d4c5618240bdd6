package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/plugins/anthropic"
	"github.com/loom-kernel/loom/plugins/gemini"
	"github.com/loom-kernel/loom/plugins/openai"
)

// committedCassette is testdata/cassettes/planner.json as it was when this
// binary was built: the demo replays it wherever it runs from.
//
//go:embed testdata/cassettes/planner.json
var committedCassette []byte

// cassetteName is the committed cassette's path in the package, for people.
const cassetteName = "testdata/cassettes/planner.json"

// liveModels are the providers -provider runs live, with the environment
// variable each reads its API key from and the model asked for without
// -model.
var liveModels = map[string]struct{ env, model string }{
	anthropic.ProviderName: {anthropic.EnvAPIKey, "claude-sonnet-4-5"},
	openai.DefaultName:     {openai.EnvAPIKey, "gpt-4.1"},
	gemini.DefaultName:     {gemini.DefaultEnv, "gemini-2.5-flash"},
}

// modelFlags choose the planner's model; every command takes them.
type modelFlags struct {
	provider string // "" replays the cassette; scripted; anthropic, openai, gemini
	model    string // "" is the cassette's model or the provider's default
	cassette string // replay this file instead of the committed cassette
}

// register adds the flags to fs.
func (f *modelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.provider, "provider", f.provider, "the planner's model: anthropic, openai or gemini live (key from $ANTHROPIC_API_KEY, $OPENAI_API_KEY, $GEMINI_API_KEY), scripted (offline, any incident); default: replay the committed cassette")
	fs.StringVar(&f.model, "model", f.model, "the `model` to ask (default: the cassette's, or the provider's usual one)")
	fs.StringVar(&f.cassette, "cassette", f.cassette, "replay this cassette `file` instead of the committed one")
}

// args renders the flags for a child process.
func (f modelFlags) args() []string {
	var a []string
	for _, kv := range [][2]string{{"-provider", f.provider}, {"-model", f.model}, {"-cassette", f.cassette}} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	return a
}

// model is the planner's model in one process: the provider, the model it
// is asked for, and how it answers, in words.
type model struct {
	provider llm.Provider
	name     string
	source   string
	// meter is the clock a model call's elapsed ms are read from (the zero
	// Meter reads time.Now); the golden histories freeze it, so a call's
	// RESOURCE_METERED is the same in every run.
	meter middleware.Meter
}

// toolID is the tool id the planner's model calls are recorded under.
func (m model) toolID() string { return llm.ToolID(m.provider.Name(), m.name) }

// open builds the planner's model the flags choose. A live provider
// without its API key is refused here, naming the variable, before
// anything runs.
func (f modelFlags) open() (model, error) {
	switch f.provider {
	case "":
		return openReplay(f.cassette, f.model)
	case scriptedProvider:
		return model{provider: scriptedModel{}, name: or(f.model, scriptedModelName), source: "the scripted model, offline"}, nil
	}
	p, m, err := liveProvider(f.provider, f.model)
	if err != nil {
		return model{}, err
	}
	return model{provider: p, name: m, source: "live, " + f.provider + "'s API"}, nil
}

// recorder is the provider -record records from: the scripted model, or
// the live one -provider names.
func (f modelFlags) recorder() (llm.Provider, string, error) {
	if f.provider == "" || f.provider == scriptedProvider {
		return scriptedModel{}, or(f.model, scriptedModelName), nil
	}
	return liveProvider(f.provider, f.model)
}

// liveProvider builds a provider plugin, refusing it without an API key.
func liveProvider(name, modelName string) (llm.Provider, string, error) {
	live, ok := liveModels[name]
	if !ok {
		return nil, "", usagef("-provider %q: want anthropic, openai, gemini or scripted (or none: replay the cassette)", name)
	}
	if os.Getenv(live.env) == "" {
		return nil, "", fmt.Errorf("-provider %s runs the planner live and needs an API key: set %s (without -provider the demo replays the committed cassette, offline)", name, live.env)
	}
	cred := llm.Credential{Env: live.env}
	var (
		p   llm.Provider
		err error
	)
	switch name {
	case anthropic.ProviderName:
		p, err = anthropic.New(anthropic.Options{Credential: cred})
	case openai.DefaultName:
		p, err = openai.New(openai.Options{Credential: cred})
	default:
		p, err = gemini.New(gemini.Options{Credential: cred})
	}
	if err != nil {
		return nil, "", err
	}
	return p, or(modelName, live.model), nil
}

// openReplay opens a cassette in Replay mode: file, or the committed one
// embedded in the binary.
func openReplay(file, modelName string) (model, error) {
	raw, label := committedCassette, cassetteName+" (committed, embedded in this binary)"
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return model{}, fmt.Errorf("the cassette: %w", err)
		}
		raw, label = b, file
	}
	c, err := llm.ReadCassette(label, raw, llm.CassetteOptions{Mode: llm.Replay, ScrubRequest: scrubRequest})
	if err != nil {
		return model{}, err
	}
	models := c.Models()
	if len(models) == 0 {
		return model{}, fmt.Errorf("cassette %s holds no interaction: record it with incident demo -record", label)
	}
	return model{provider: replayed{Cassette: c}, name: or(modelName, models[0]),
		source: fmt.Sprintf("replaying %s, recorded from %s: offline, a request it does not hold fails", label, c.Name())}, nil
}

// replayed is a replaying cassette whose refusals say what it holds.
type replayed struct {
	*llm.Cassette
}

// Complete implements llm.Provider.
func (r replayed) Complete(ctx context.Context, req llm.Request, sink func(llm.Delta)) (llm.Response, error) {
	resp, err := r.Cassette.Complete(ctx, req, sink)
	var miss *llm.UnrecordedRequestError
	if errors.As(err, &miss) {
		return resp, fmt.Errorf("%w (the cassette holds the scenarios of record.go; plan other incidents with -provider scripted, offline, or a live -provider)", err)
	}
	return resp, err
}

// or is s, else def.
func or(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
