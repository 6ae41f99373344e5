package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestSecretProgramsStartOutsideWritableTrees: a secret's program, named
// by a policy in a tree the sandbox's commands may write (a workspace's
// own .moat.toml), starts at /, not there: what it would read there
// unnamed (a module "python3 -m mint" imports, a script's ./lib.sh) is
// not what trust hashed, and a command could have written it for the
// host to run (found by a tester, as root). Its file arguments are given
// by their absolute paths. The control: a policy outside the writable
// trees runs its programs in its own directory, as documented.
func TestSecretProgramsStartOutsideWritableTrees(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	for _, dir := range []string{ws, outside} {
		// The value is the directory the program ran in, and the file
		// argument as the program got it.
		if err := os.WriteFile(filepath.Join(dir, "mint.sh"), []byte("echo \"$(pwd) $0\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		dir, want string
	}{
		{ws, "/ " + filepath.Join(ws, "mint.sh")},
		{outside, outside + " mint.sh"},
	} {
		p := policy.Default()
		p.Source = filepath.Join(tc.dir, ".moat.toml")
		p.Workspace.Path = ws
		p.Network.Mode = policy.NetworkAllow
		p.Network.Allow = []string{"api.test"}
		p.Secrets = []policy.Secret{{Name: "TOKEN", Source: "command:/bin/sh mint.sh", Hosts: []string{"api.test"}}}
		rs, err := loadSecrets(context.Background(), p, tc.dir, nil)
		if err != nil {
			t.Fatalf("policy in %s: %v", tc.dir, err)
		}
		if got := rs.list[0].Value; got != tc.want {
			t.Errorf("policy in %s: the program ran as %q, want %q", tc.dir, got, tc.want)
		}
	}
}
