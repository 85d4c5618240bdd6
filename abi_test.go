package loom_test

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/loom-kernel/loom"
)

// pinnedSyscalls maps each KernelABIVersion to the digest of its syscall
// list: adding a syscall is a MINOR bump, removing one MAJOR (K1).
var pinnedSyscalls = map[string]string{
	"1.3.0": "a727d9e7c723691b4b49672034c81532a221684267df7bb191deca4efe67dd18",
}

func TestKernelABIVersionPinsSyscalls(t *testing.T) {
	sum := sha256.Sum256([]byte(strings.Join(loom.KernelSyscalls, "\n")))
	got := hex.EncodeToString(sum[:])
	want, ok := pinnedSyscalls[loom.KernelABIVersion]
	if !ok || want != got {
		t.Fatalf("KernelABIVersion %s does not pin the syscalls %v (digest %s): bump the version and record the digest together",
			loom.KernelABIVersion, loom.KernelSyscalls, got)
	}
}

// Every advertised syscall is a method of *Context or a package-level
// helper over it: the list never promises what the kernel lacks.
func TestKernelSyscallsExist(t *testing.T) {
	ctxType := reflect.TypeOf(&loom.Context{})
	helpers := map[string]bool{"now": true, "random": true}
	for _, name := range loom.KernelSyscalls {
		method := string(unicode.ToUpper(rune(name[0]))) + name[1:]
		if _, ok := ctxType.MethodByName(method); !ok && !helpers[name] {
			t.Errorf("syscall %q has no *Context method %s", name, method)
		}
	}
}
