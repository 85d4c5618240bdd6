package wire

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/loom-kernel/loom"
)

// ErrUnauthenticated is what BearerToken's func returns for a request
// without the right token. Handler never sends an authenticator's error
// text: the caller sees CodeUnauthenticated only.
var ErrUnauthenticated = errors.New("wire: unauthenticated")

// BearerToken returns an Options.Authenticate that admits a request carrying
// "Authorization: Bearer <token>" as principal, and refuses every other
// request with ErrUnauthenticated. The comparison takes the same time
// whatever the presented token, so it leaks neither the token nor its
// length. An empty token admits nobody.
func BearerToken(token string, principal any) func(r *http.Request) (any, error) {
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) (any, error) {
		if token == "" {
			return nil, ErrUnauthenticated
		}
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return nil, ErrUnauthenticated
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			return nil, ErrUnauthenticated
		}
		return principal, nil
	}
}

type principalKey struct{}

// withPrincipal attaches the authenticated principal for the runtime's
// Authorizer (loom.WithPrincipal) and for the app (PrincipalFrom).
func withPrincipal(ctx context.Context, p any) context.Context {
	return loom.WithPrincipal(context.WithValue(ctx, principalKey{}, p), p)
}

// PrincipalFrom returns the principal Options.Authenticate admitted the
// current request as, or nil outside a wire request. An app's
// loom.ResumeAuthenticator uses it to record who answered a gate
// (APPROVAL_GRANTED): the runtime puts the principal on the context for its
// Authorizer but offers no way to read it back.
func PrincipalFrom(ctx context.Context) any { return ctx.Value(principalKey{}) }
