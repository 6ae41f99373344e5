//go:build linux

package daemon

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
)

// TestSentPolicyHostFiles: a policy sent to the daemon (moat session
// create --policy, moat mcp) names a secret's program in the workspace by
// absolute path. The session's command cannot rewrite it, nor can the
// files API, where the file beside it is written (the control); the
// program runs from /, not from the daemon's working directory. The same
// policy naming the program by a relative path is refused by field:
// there is no directory it could be relative to.
func TestSentPolicyHostFiles(t *testing.T) {
	ws := t.TempDir()
	out := t.TempDir()
	mint := filepath.Join(ws, "mint.sh")
	const script = "#!/bin/sh\npwd > \"$1\"\necho value\n"
	if err := os.WriteFile(mint, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	pwdFile := filepath.Join(out, "pwd")
	doc := func(prog string) string {
		return `[network]
mode = "allow"
allow = ["api.test"]

[[secrets]]
name = "TOKEN"
source = "command:` + prog + ` ` + pwdFile + `"
hosts = ["api.test"]
`
	}
	m := newManager(t, Config{Engine: Sandboxes})
	ctx := context.Background()
	tenant := UIDTenant(os.Geteuid())

	_, err := m.Create(ctx, tenant, &CreateRequest{Workspace: ws, Policy: doc("./mint.sh")})
	var pe *policy.Errors
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "secrets[0].source") {
		t.Fatalf("a relative program in a sent policy: %v, want a field error", err)
	}

	s, err := m.Create(ctx, tenant, &CreateRequest{Workspace: ws, Policy: doc(mint)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Delete(ctx, tenant, s.ID)
	if b, _ := os.ReadFile(pwdFile); string(b) != "/\n" {
		t.Errorf("the secret's program ran in %q, want /", b)
	}
	var stdout, stderr bytes.Buffer
	rep, err := s.Exec(ctx, &ExecRequest{Args: []string{"sh", "-c",
		"echo x > other.txt && echo WROTE; echo 'echo planted' > mint.sh || echo REFUSED; true"}},
		backend.Stdio{Stdout: &stdout, Stderr: &stderr})
	if err != nil || rep.ExitCode != 0 {
		t.Fatalf("exec: %v %+v (stderr %q)", err, rep, stderr.String())
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "other.txt")); string(b) != "x\n" || !strings.Contains(stdout.String(), "WROTE") {
		t.Fatalf("control: the file beside the program was not written: %q (out %q)", b, stdout.String())
	}
	if b, _ := os.ReadFile(mint); string(b) != script || !strings.Contains(stdout.String(), "REFUSED") {
		t.Errorf("the command rewrote the secret's program: %q (out %q)", b, stdout.String())
	}
	if err := s.WriteFile(ctx, "other.txt", []byte("y"), 0o644); err != nil {
		t.Errorf("control: the files API did not write beside the program: %v", err)
	}
	if err := s.WriteFile(ctx, "mint.sh", []byte("echo planted"), 0o755); !errors.Is(err, ErrProtected) {
		t.Errorf("the files API wrote the secret's program: %v, want ErrProtected", err)
	}
	if b, _ := os.ReadFile(mint); string(b) != script {
		t.Errorf("the secret's program changed: %q", b)
	}
}

// TestPolicyFileOnlyFromSelf: the file a request says its policy was
// read from is taken from the daemon's own user (the control), whose
// policy's relative paths are then the file's directory's; from another
// tenant it is not looked at, and a relative path stays refused.
func TestPolicyFileOnlyFromSelf(t *testing.T) {
	dir := t.TempDir()
	ws := t.TempDir()
	file := filepath.Join(dir, "moat.toml")
	doc := "[network]\nmode = \"allow\"\nallow = [\"api.test\"]\n\n[[secrets]]\nname = \"T\"\nsource = \"file:tok\"\nhosts = [\"api.test\"]\n"
	self, err := tenantPolicy(UIDTenant(os.Geteuid()), doc, file, ws, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if self.Source != file || self.SecretDir("") != dir {
		t.Errorf("the daemon's own user's policy file: Source %q, SecretDir %q, want %s", self.Source, self.SecretDir(""), dir)
	}
	other := Tenant{ID: "uid:4242", UID: 4242}
	p, err := tenantPolicy(other, "", file, ws, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source == file {
		t.Errorf("another tenant's default policy took its file %q", p.Source)
	}
	p, err = tenantPolicy(other, "[limits]\nmemory = \"1g\"\n", file, ws, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != "policy" || p.SecretDir("") != "" {
		t.Errorf("another tenant's policy file was taken: Source %q, SecretDir %q", p.Source, p.SecretDir(""))
	}
}

// TestCheckedPolicyOnlyFromSelf: a request's Checked (the policy as its
// trust check read it) is kept by the daemon's own user's session (the
// control: its program's digest is there), and refused from another
// tenant, for a document other than the one checked, and without its
// document or file: nobody can claim a check the daemon did not see made.
func TestCheckedPolicyOnlyFromSelf(t *testing.T) {
	dir := t.TempDir()
	ws := t.TempDir()
	file := filepath.Join(dir, "moat.toml")
	mint := filepath.Join(dir, "mint")
	doc := "[network]\nmode = \"allow\"\nallow = [\"api.test\"]\n\n[[secrets]]\nname = \"T\"\nsource = \"command:./mint\"\nhosts = [\"api.test\"]\n"
	os.WriteFile(file, []byte(doc), 0o644)
	os.WriteFile(mint, []byte("#!/bin/sh\necho t\n"), 0o755)
	trust := &policy.Trust{}
	if _, err := trust.Add(file, ""); err != nil {
		t.Fatal(err)
	}
	checked, err := trust.Load(file, "")
	if err != nil {
		t.Fatal(err)
	}
	self := UIDTenant(os.Geteuid())
	p, err := tenantPolicy(self, doc, file, ws, "", checked)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.CheckedDigest(mint); !ok {
		t.Errorf("the daemon's own user's checked policy lost its program's digest")
	}
	other := Tenant{ID: "uid:4242", UID: 4242}
	for _, c := range []struct {
		name      string
		t         Tenant
		doc, file string
	}{
		{"another tenant", other, doc, file},
		{"another document", self, doc + "# more\n", file},
		{"no document", self, "", file},
		{"no file", self, doc, ""},
	} {
		if _, err := tenantPolicy(c.t, c.doc, c.file, ws, "", checked); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", c.name, err)
		}
	}
}
