package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestPinnedProgram: an ELF program whose bytes a policy's trust checked
// runs from a sealed copy of them (its /proc/self/exe is the copy, which
// no change to the file reaches), with its argv[0] and directory as
// given; unchecked (the control) it runs by path. One whose bytes no
// longer match is not run, and a checked script runs by path, its $0 as
// given.
func TestPinnedProgram(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "helper")
	elf, err := os.ReadFile("/bin/readlink")
	if err != nil {
		t.Skip("needs /bin/readlink")
	}
	if err := os.WriteFile(prog, elf, 0o755); err != nil {
		t.Fatal(err)
	}
	digestOf := func(b []byte) string {
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	checked := func(want string, d string) func(string) (string, bool) {
		return func(path string) (string, bool) { return d, path == want }
	}
	argv := []string{"./helper", "/proc/self/exe"}

	// The control: unchecked, it runs from the file.
	out, err := secretCommand(context.Background(), argv, dir, dir, "", nil)
	if err != nil || strings.TrimSpace(out) != prog {
		t.Fatalf("unchecked: %q %v, want it run from %s", out, err, prog)
	}
	out, err = secretCommand(context.Background(), argv, dir, dir, "", checked(prog, digestOf(elf)))
	if err != nil || !strings.HasPrefix(out, "/memfd:moat-program") {
		t.Errorf("checked: ran from %q (%v), want the sealed copy", out, err)
	}
	out, err = secretCommand(context.Background(), []string{"./helper", "-f", "."}, dir, dir, "", checked(prog, digestOf(elf)))
	if err != nil || strings.TrimSpace(out) != dir {
		t.Errorf("checked: its directory is %q (%v), want %s", out, err, dir)
	}

	// Changed since the check: not run.
	_, err = secretCommand(context.Background(), argv, dir, dir, "", checked(prog, digestOf([]byte("other"))))
	if !errors.Is(err, errChanged) {
		t.Errorf("changed: %v, want errChanged", err)
	}

	// A script runs by path: its interpreter reads it there.
	const script = "#!/bin/sh\necho \"$0\"\n"
	os.WriteFile(prog, []byte(script), 0o755)
	out, err = secretCommand(context.Background(), []string{"./helper"}, dir, dir, "", checked(prog, digestOf([]byte(script))))
	if err != nil || strings.TrimSpace(out) != "./helper" {
		t.Errorf("a checked script: $0 %q (%v), want ./helper", out, err)
	}
}

// TestTrustedProgramPinned: a trusted policy's ELF secret program runs
// from the copy of the bytes its trust checked, through loadSecrets as a
// run does; the same policy not loaded through the trust (the control,
// as a --policy file is) runs it by path.
func TestTrustedProgramPinned(t *testing.T) {
	elf, err := os.ReadFile("/bin/readlink")
	if err != nil {
		t.Skip("needs /bin/readlink")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "helper"), elf, 0o755)
	path := filepath.Join(dir, ".moat.toml")
	os.WriteFile(path, []byte(`[network]
mode = "allow"
allow = ["api.test"]

[[secrets]]
name = "TOKEN"
source = "command:./helper /proc/self/exe"
hosts = ["api.test"]
`), 0o644)
	home, _ := os.UserHomeDir()
	trust := &policy.Trust{}
	if _, err := trust.Add(path, home); err != nil {
		t.Fatal(err)
	}
	value := func(p *policy.Policy) string {
		t.Helper()
		rs, err := loadSecrets(context.Background(), p, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rs.list[0].Value
	}
	p, err := trust.Load(path, home)
	if err != nil {
		t.Fatal(err)
	}
	if v := value(p); !strings.HasPrefix(v, "/memfd:moat-program") {
		t.Errorf("the trusted program ran from %q, want the sealed copy", v)
	}
	named, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if v := value(named); v != filepath.Join(dir, "helper") {
		t.Errorf("control: the named policy's program ran from %q, want its file", v)
	}
}
