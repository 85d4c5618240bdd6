package crypto_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom/plugins/crypto"
)

func TestFileKeyStoreKeysAreStableAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	ks := openKeys(t, dir)
	a, err := ks.Key(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	again, err := ks.Key(ctx, "alice")
	if err != nil || again.ID != a.ID || !bytes.Equal(again.Bytes, a.Bytes) {
		t.Fatalf("second Key(alice) = %s, %v: want the same key", again.ID, err)
	}
	b, err := ks.Key(ctx, "bob")
	if err != nil || b.ID == a.ID || bytes.Equal(b.Bytes, a.Bytes) || len(b.Bytes) != crypto.DataKeyBytes {
		t.Fatalf("Key(bob) = %s, %v: want a distinct 32-byte key", b.ID, err)
	}
	if err := ks.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Key(ctx, "alice"); !errors.Is(err, crypto.ErrKeyStoreClosed) {
		t.Fatalf("Key after Close = %v, want ErrKeyStoreClosed", err)
	}
	reopened := openKeys(t, dir)
	got, err := reopened.Open(ctx, "alice", a.ID)
	if err != nil || !bytes.Equal(got.Bytes, a.Bytes) {
		t.Fatalf("Open(alice) after reopen: %v, same key %v", err, bytes.Equal(got.Bytes, a.Bytes))
	}
	if _, err := reopened.Open(ctx, "alice", b.ID); !errors.Is(err, crypto.ErrKeyNotFound) {
		t.Fatalf("Open(alice, bob's id) = %v, want ErrKeyNotFound", err)
	}
	// The file holds salts and ids, never a derived key.
	raw, err := os.ReadFile(reopened.Path())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(hex.EncodeToString(a.Bytes))) || bytes.Contains(raw, a.Bytes) {
		t.Fatal("the keystore file holds a data key")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".keys.json.tmp-*")); len(leftovers) != 0 {
		t.Fatalf("temporary files left behind: %v", leftovers)
	}
}

func TestFileKeyStoreDestroyIsDurableAndProven(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	ks := openKeys(t, dir)
	k, err := ks.Key(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ks.Destroy(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	want := crypto.DestructionProof{Version: crypto.ProofVersion, Subject: "alice", KeyID: k.ID, DestroyedAt: fixedClock().UnixMilli()}
	if p.Digest == "" || p.Digest == k.ID {
		t.Fatalf("proof digest %q", p.Digest)
	}
	want.Digest = p.Digest
	if p != want {
		t.Fatalf("proof = %+v, want %+v", p, want)
	}
	if again, err := ks.Destroy(ctx, "alice"); err != nil || again != p {
		t.Fatalf("second Destroy = %+v, %v: want the recorded proof", again, err)
	}
	reopened := openKeys(t, dir)
	var kd *crypto.KeyDestroyedError
	if _, err := reopened.Open(ctx, "alice", k.ID); !errors.As(err, &kd) || kd.Proof != p {
		t.Fatalf("Open after Destroy and reopen = %v, want *KeyDestroyedError with the proof", err)
	}
	if _, err := reopened.Key(ctx, "alice"); !errors.Is(err, crypto.ErrKeyDestroyed) {
		t.Fatalf("Key of a destroyed subject = %v, want ErrKeyDestroyed (no new key)", err)
	}
	if err := reopened.VerifyProof(ctx, p); err != nil {
		t.Fatalf("VerifyProof: %v", err)
	}
	tampered := p
	tampered.DestroyedAt++
	if err := reopened.VerifyProof(ctx, tampered); !errors.Is(err, crypto.ErrProofInvalid) {
		t.Fatalf("VerifyProof(tampered) = %v", err)
	}
	// The salt is gone from the file: the key can never be derived again.
	raw, err := os.ReadFile(reopened.Path())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(`"salt"`)) {
		t.Fatalf("the file still holds a salt after the only subject was destroyed: %s", raw)
	}
	// A subject that never had a key is tombstoned too.
	never, err := reopened.Destroy(ctx, "carol")
	if err != nil || never.KeyID != "" {
		t.Fatalf("Destroy(carol) = %+v, %v", never, err)
	}
	if _, err := reopened.Key(ctx, "carol"); !errors.Is(err, crypto.ErrKeyDestroyed) {
		t.Fatalf("Key(carol) after Destroy = %v", err)
	}
}

func TestFileKeyStoreRefusesBadMasterKeysWritingNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.json")
	keyFile := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		opts crypto.FileKeyStoreOptions
	}{
		{"none", crypto.FileKeyStoreOptions{}},
		{"short bytes", crypto.FileKeyStoreOptions{MasterKey: make([]byte, 16)}},
		{"long bytes", crypto.FileKeyStoreOptions{MasterKey: make([]byte, 33)}},
		{"missing file", crypto.FileKeyStoreOptions{MasterKeyFile: filepath.Join(dir, "absent.key")}},
		{"short file", crypto.FileKeyStoreOptions{MasterKeyFile: keyFile("short.key", make([]byte, 31))}},
		{"bad hex file", crypto.FileKeyStoreOptions{MasterKeyFile: keyFile("hex.key", bytes.Repeat([]byte("zz"), 32))}},
		{"both", crypto.FileKeyStoreOptions{MasterKey: testMaster, MasterKeyFile: keyFile("ok.key", testMaster)}},
	}
	for _, c := range cases {
		ks, err := crypto.OpenFileKeyStore(path, c.opts)
		var mk *crypto.MasterKeyError
		if !errors.As(err, &mk) || ks != nil {
			t.Fatalf("%s: OpenFileKeyStore = %v, want *MasterKeyError", c.name, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: a refused open created the keystore file", c.name)
		}
	}
	if _, err := crypto.OpenFileKeyStore(path, cases[3].opts); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing key file: %v does not wrap fs.ErrNotExist", err)
	}

	// A hex key file works and is the same key as its bytes.
	hexKey := keyFile("hex-ok.key", []byte(hex.EncodeToString(testMaster)+"\n"))
	ks, err := crypto.OpenFileKeyStore(path, crypto.FileKeyStoreOptions{MasterKeyFile: hexKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Key(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	if err := ks.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	// Another master key is refused at open, and the file is untouched.
	other := bytes.Repeat([]byte{7}, crypto.MasterKeyBytes)
	if _, err := crypto.OpenFileKeyStore(path, crypto.FileKeyStoreOptions{MasterKey: other}); !errors.Is(err, crypto.ErrMasterKeyMismatch) {
		t.Fatalf("wrong master key: %v, want ErrMasterKeyMismatch", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("a refused open changed the keystore file")
	}
	// A corrupt file is a typed refusal too.
	bad := keyFile("bad.json", []byte("{not json"))
	var fe *crypto.KeyStoreFileError
	if _, err := crypto.OpenFileKeyStore(bad, crypto.FileKeyStoreOptions{MasterKey: testMaster}); !errors.As(err, &fe) {
		t.Fatalf("corrupt keystore file: %v, want *KeyStoreFileError", err)
	}
}

func TestFileKeyStoreRefusesInvalidSubjects(t *testing.T) {
	ks := openKeys(t, t.TempDir())
	for _, s := range []string{"", "a\x00b", string(bytes.Repeat([]byte("x"), 513))} {
		if _, err := ks.Key(context.Background(), s); !errors.Is(err, crypto.ErrInvalidSubject) {
			t.Fatalf("Key(%q) = %v, want ErrInvalidSubject", s, err)
		}
	}
}
