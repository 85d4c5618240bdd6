package loomtest_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that keeps the failures a helper reports
// instead of failing the test, so a test can check the failure path: the
// message a user would read. Everything else (Cleanup, Context, TempDir,
// Name) is the real test's.
type recorder struct {
	testing.TB

	mu     sync.Mutex
	errors []string
	fatal  bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) { r.add(fmt.Sprintf(format, args...), false) }
func (r *recorder) Error(args ...any)                 { r.add(fmt.Sprint(args...), false) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.add(fmt.Sprintf(format, args...), true)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.add(fmt.Sprint(args...), true)
	runtime.Goexit()
}

func (r *recorder) FailNow() {
	r.add("FailNow", true)
	runtime.Goexit()
}

func (r *recorder) Fail() { r.add("Fail", false) }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errors) > 0
}

func (r *recorder) add(msg string, fatal bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, msg)
	r.fatal = r.fatal || fatal
}

// report is every failure, one per line.
func (r *recorder) report() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errors, "\n")
}

// failing runs fn with a recorder over t, on a goroutine of its own (a
// Fatal ends it as it ends a test), and returns the recorder.
func failing(t *testing.T, fn func(tb testing.TB)) *recorder {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

// mustContain fails t unless every part is in the recorded report.
func mustContain(t *testing.T, r *recorder, parts ...string) {
	t.Helper()
	got := r.report()
	if got == "" {
		t.Fatal("the helper reported no failure")
	}
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("the failure does not say %q:\n%s", p, got)
		}
	}
}
