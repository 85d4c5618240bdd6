package llm

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/loom-kernel/loom/middleware"
)

// Credential says where a provider's API key comes from: a secret
// reference resolved at call time, an environment variable, or (for tests)
// the key itself. The key is read for each call and handed to the SDK's
// request options only: it never reaches a Request, a Response, an error,
// a cassette or the log.
type Credential struct {
	// Secret names the key in Resolver (a middleware.SecretResolver, the
	// same one the redaction ring uses).
	Secret   string
	Resolver middleware.SecretResolver
	// Env names an environment variable holding the key (each provider
	// defaults it to its API's usual one: ANTHROPIC_API_KEY, OPENAI_API_KEY,
	// GEMINI_API_KEY).
	Env string
	// Key is the key itself. Prefer Secret or Env outside tests.
	Key string
}

// ErrNoCredential is returned when a Credential yields no key.
var ErrNoCredential = errors.New("llm: no API key")

// Resolve returns the key: Key, else the secret, else the environment
// variable. The error names where it looked, never a value.
func (c Credential) Resolve(ctx context.Context) (string, error) {
	switch {
	case c.Key != "":
		return c.Key, nil
	case c.Secret != "":
		if c.Resolver == nil {
			return "", fmt.Errorf("%w: secret %q named without a Resolver", ErrNoCredential, c.Secret)
		}
		key, err := c.Resolver.ResolveSecret(ctx, c.Secret)
		if err != nil {
			return "", fmt.Errorf("%w: resolving secret %q: %w", ErrNoCredential, c.Secret, err)
		}
		if key == "" {
			return "", fmt.Errorf("%w: secret %q is empty", ErrNoCredential, c.Secret)
		}
		return key, nil
	case c.Env != "":
		if key := os.Getenv(c.Env); key != "" {
			return key, nil
		}
		return "", fmt.Errorf("%w: set %s (or give the provider a secret reference)", ErrNoCredential, c.Env)
	}
	return "", fmt.Errorf("%w: the provider has no Credential", ErrNoCredential)
}

// WithDefaultEnv returns c with Env set to env when c names no source.
func (c Credential) WithDefaultEnv(env string) Credential {
	if c.Key == "" && c.Secret == "" && c.Env == "" {
		c.Env = env
	}
	return c
}
