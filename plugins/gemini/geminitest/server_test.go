package geminitest

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// recordingTB records the failures the fake reports instead of failing the
// test, so a test can check the fake refuses what the real API would.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

func TestUnexpectedRequestsFailWith404(t *testing.T) {
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/v1beta/models/m:generateContent"},
		{http.MethodPost, "/v1/models/m:generateContent"},
		{http.MethodPost, "/v1beta/models/m:streamGenerateContent"}, // without alt=sse
		{http.MethodPost, "/v1beta/models/m:countTokens"},
		{http.MethodPost, "/v1beta/models/m:generateContent?alt=sse"},
	} {
		rec := &recordingTB{TB: t}
		srv := NewServer(rec)
		req, err := http.NewRequest(tc.method, srv.URL()+tc.path, strings.NewReader(`{"contents":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || len(rec.failures()) != 1 {
			t.Errorf("%s %s: status %d, %d failure(s) reported; want 404 and one", tc.method, tc.path, resp.StatusCode, len(rec.failures()))
		}
		if n := len(srv.Requests()); n != 0 {
			t.Errorf("%s %s: recorded %d requests, want none", tc.method, tc.path, n)
		}
	}
}

func TestUnknownRequestMembersFail(t *testing.T) {
	rec := &recordingTB{TB: t}
	srv := NewServer(rec)
	resp, err := srv.srv.Client().Post(srv.URL()+"/v1beta/models/m:generateContent", "application/json",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"cachedContent":"cachedContents/x"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || len(rec.failures()) != 1 {
		t.Fatalf("status %d, failures %v; want 400 and the unknown member reported", resp.StatusCode, rec.failures())
	}
}

func TestReplayedCallWithoutSignatureIsRefusedLikeGemini3(t *testing.T) {
	rec := &recordingTB{TB: t}
	srv := NewServer(rec)
	resp, err := srv.srv.Client().Post(srv.URL()+"/v1beta/models/m:generateContent", "application/json",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]},
{"role":"model","parts":[{"functionCall":{"id":"a","name":"f","args":{}}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || len(rec.failures()) != 0 {
		t.Fatalf("status %d, failures %v; want the API's 400 and no test failure", resp.StatusCode, rec.failures())
	}
}
