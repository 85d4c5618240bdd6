package openaitest

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing, to
// prove the fake's guards fire.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recorder) Helper()          {}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) close() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestServerRefusesWhatTheAPIWouldNot(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		status                   int
		complaint                string
	}{
		{"WrongPath", http.MethodPost, "/v1/completions", `{}`, http.StatusNotFound, "want POST /v1/chat/completions"},
		{"WrongMethod", http.MethodGet, Path, ``, http.StatusNotFound, "want POST"},
		{"UnknownParameter", http.MethodPost, Path, `{"model":"m","messages":[],"max_tokens":5}`, http.StatusBadRequest, "max_tokens"},
		{"StreamWithoutUsage", http.MethodPost, Path, `{"model":"m","messages":[],"stream":true}`, http.StatusBadRequest, "include_usage"},
		{"LooseSchema", http.MethodPost, Path, `{"model":"m","messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{}}}}`,
			http.StatusBadRequest, "strict"},
		{"LateSystem", http.MethodPost, Path, `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"system","content":"b"}]}`,
			http.StatusBadRequest, "after the first"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			s := NewServer(rec)
			defer rec.close()
			req, err := http.NewRequest(c.method, s.http.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := s.http.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, c.status)
			}
			if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], c.complaint) {
				t.Errorf("the fake reported %q, want one failure saying %q", rec.errors, c.complaint)
			}
			if n := len(s.Requests()); n != 0 {
				t.Errorf("the fake recorded %d requests, want none", n)
			}
		})
	}
}
