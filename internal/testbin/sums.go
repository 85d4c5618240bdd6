package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// DirSums returns the sha256 of every regular file in dir, by name, and the
// type of every other entry (a named pipe is never read: that would
// block). Comparing two calls with SameSums proves a command wrote nothing
// there: no changed, created or removed file.
func DirSums(t testing.TB, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			sums[e.Name()] = e.Type().String()
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		sums[e.Name()] = hex.EncodeToString(sum[:])
	}
	return sums
}

// SameSums fails t for every file what created, changed or removed
// between two DirSums of one directory.
func SameSums(t testing.TB, what string, before, after map[string]string) {
	t.Helper()
	for name, sum := range after { //loom:order-independent each file is compared on its own
		switch b, ok := before[name]; {
		case !ok:
			t.Errorf("%s created %s", what, name)
		case b != sum:
			t.Errorf("%s changed %s", what, name)
		}
	}
	for name := range before { //loom:order-independent each file is compared on its own
		if _, ok := after[name]; !ok {
			t.Errorf("%s removed %s", what, name)
		}
	}
}
