package workerhttp

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
)

// ErrUnauthenticated is what BearerToken's func returns for a request
// without the right token, and what a *RemoteError for a 401 unwraps to.
// The server never sends an authenticator's error text: the caller sees
// CodeUnauthenticated only.
var ErrUnauthenticated = errors.New("workerhttp: unauthenticated")

// BearerToken returns an Options.Authenticate that admits a request carrying
// "Authorization: Bearer <token>" and refuses every other request with
// ErrUnauthenticated. The comparison takes the same time whatever the
// presented token, so it leaks neither the token nor its length. An empty
// token admits nobody.
func BearerToken(token string) func(r *http.Request) error {
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) error {
		if token == "" {
			return ErrUnauthenticated
		}
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return ErrUnauthenticated
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			return ErrUnauthenticated
		}
		return nil
	}
}
