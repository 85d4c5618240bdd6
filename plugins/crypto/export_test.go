package crypto_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/loom-kernel/loom/plugins/crypto"
)

// ExportSubject returns every execution of the subject, unsealed, and none
// of another's; after erasure the same export holds only markers.
func TestExportSubjectHoldsTheSubjectsHistoriesAndAfterErasureOnlyMarkers(t *testing.T) {
	s := openSealedSQLite(t, t.TempDir())
	rt := newRuntime(t, s)
	done, parked, mail := runKYC(t, rt)
	ctx := context.Background()
	if _, err := rt.Start(ctx, "kyc", doc{"user": "user-8", "ssn": "other-person"}); err != nil {
		t.Fatal(err)
	}
	var exp crypto.SubjectExport
	exp, err := s.events.ExportSubject(ctx, "user-7", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range exp.Executions {
		ids = append(ids, h.ExecutionID)
	}
	if exp.Subject != "user-7" || len(ids) != 3 || ids[0] != done || ids[1] != parked || ids[2] != mail {
		t.Fatalf("exported %v", ids)
	}
	raw, err := json.Marshal(exp)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(secret+"-input")) || bytes.Contains(raw, []byte("other-person")) {
		t.Fatal("the export is not the subject's data alone, unsealed")
	}
	if _, err := s.events.EraseSubject(ctx, "user-7"); err != nil {
		t.Fatal(err)
	}
	after, err := s.events.ExportSubject(ctx, "user-7", nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = json.Marshal(after)
	if len(after.Executions) != 3 || bytes.Contains(raw, []byte(secret)) || !bytes.Contains(raw, []byte(`$shredded`)) {
		t.Fatalf("after erasure the export holds %d executions, plaintext %v", len(after.Executions), bytes.Contains(raw, []byte(secret)))
	}
	if _, err := s.events.ExportSubject(ctx, "", nil); err == nil {
		t.Fatal("an empty subject was exported")
	}
}
