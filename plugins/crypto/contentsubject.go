package crypto

import (
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom/effect"
)

// ContentSubject is an effect middleware that runs every effect under its
// execution's subject (WithSubject with subjects.SubjectOf of the effect's
// execution), so a ContentStore call inside it — the claim check's Put of a
// large step output — seals under the subject the log is sealed under, and
// erasing the subject shreds the content with the log. Put it before
// middleware.ClaimCheck in Config.Middleware (the first is outermost). An
// execution that is not sealed runs unchanged: the ContentStore then uses
// its DefaultSubject or refuses with ErrNoSubject. A failure to resolve the
// subject fails the attempt before the effect runs.
func ContentSubject(subjects SubjectResolver) effect.Middleware {
	return func(ec *effect.Context, in json.RawMessage, next effect.Func) (json.RawMessage, error) {
		subject, err := subjects.SubjectOf(ec.Ctx(), ec.ExecutionID)
		if err != nil {
			return nil, fmt.Errorf("crypto: the subject of %q: %w", ec.ExecutionID, err)
		}
		if subject == "" {
			return next(ec, in)
		}
		return next(ec.WithContext(WithSubject(ec.Ctx(), subject)), in)
	}
}
