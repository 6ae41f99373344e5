package sandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestPlantedSubmoduleGitDir: a git directory the command plants where
// git keeps a submodule's (.git/modules/NAME) for a submodule the host has
// not checked out yet is taken by git's next `submodule update --init`,
// and its config runs from then on. Each plant is taken out: a HEAD that
// is a link into refs/ (git follows it), a name deeper than the walk
// looks, and a plant behind more git directories than it counts. The
// control: each plant made on the host runs the probe.
func TestPlantedSubmoduleGitDir(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	// A plant leaves a directory mode 0111, in the workspace or the
	// quarantine: opened again for the temporary directories' removal.
	t.Cleanup(func() { exec.Command("chmod", "-R", "u+rwx", state).Run() })
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	deep := strings.Repeat("d/", 17) + "lib"
	for _, tc := range []struct {
		name, sub, before, attack string
	}{
		{"HEAD a link", "lib", "", ""},
		{"name deeper than the walk", deep, "", ""},
		{"behind many git directories", "zzz", `python3 -c 'import os
for i in range(4100): os.makedirs(".git/modules/a%d" % i); open(".git/modules/a%d/HEAD" % i, "w").close()';`, ""},
		// A reviewer's: the submodule's git directory a link to one
		// planted in the workspace.
		{"a link to a planted one", "lib", "", `git init -q --bare planted && git config -f planted/config core.bare false && git config -f planted/config core.fsmonitor "touch $PROOF; false" && mkdir -p .git/modules && ln -s ../../planted .git/modules/lib`},
		// Beneath a directory that may not be listed, which git passes
		// through by name (an ordinary user's guard could not see it).
		{"behind a directory not listed", "vendor/lib", "", `d=.git/modules/vendor/lib && git init -q --bare "$d" && git config -f "$d/config" core.bare false && git config -f "$d/config" core.fsmonitor "touch $PROOF; false" && chmod 111 .git/modules/vendor`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setup := func() string {
				base := t.TempDir()
				t.Cleanup(func() { exec.Command("chmod", "-R", "u+rwx", base).Run() })
				lib := filepath.Join(base, "libsrc")
				os.Mkdir(lib, 0o755)
				hostGit(t, lib, "init", "-q")
				os.WriteFile(filepath.Join(lib, "l"), []byte("l\n"), 0o644)
				hostGit(t, lib, "add", ".")
				hostGit(t, lib, "commit", "-q", "-m", "l")
				origin := filepath.Join(base, "origin")
				os.Mkdir(origin, 0o755)
				hostGit(t, origin, "init", "-q")
				hostGit(t, origin, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "--name", tc.sub, lib, "lib")
				hostGit(t, origin, "commit", "-q", "-m", "m")
				hostGit(t, base, "clone", "-q", origin, "ws")
				return filepath.Join(base, "ws")
			}
			attack := tc.attack
			if attack == "" {
				attack = tc.before + fmt.Sprintf(`d=.git/modules/%s && git init -q --bare "$d" && rm "$d/HEAD" && ln -s refs/heads/master "$d/HEAD" && git config -f "$d/config" core.bare false && git config -f "$d/config" core.fsmonitor "touch $PROOF; false"`, tc.sub)
			}
			update := func(ws string) {
				hostGit(t, ws, "-c", "protocol.file.allow=always", "submodule", "update", "--init", "-q")
				hostGit(t, ws, "status")
			}

			ws := setup()
			proof := filepath.Join(t.TempDir(), "PROOF")
			cmd := exec.Command("sh", "-c", attack)
			cmd.Dir, cmd.Env = ws, append(os.Environ(), "PROOF="+proof)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the plant on the host: %v %s", err, out)
			}
			update(ws)
			if _, err := os.Stat(proof); err != nil {
				t.Fatalf("control: the plant made on the host did not make git run the probe; the test cannot tell")
			}

			ws = setup()
			proof = filepath.Join(t.TempDir(), "PROOF")
			r := sh(t, ws, func(p *policy.Policy) { p.Env.Set["PROOF"] = proof }, attack)
			if r.err != nil || r.rep.ExitCode != 0 {
				t.Fatalf("run: %v %d\n%s", r.err, r.rep.ExitCode, r.stderr)
			}
			update(ws)
			if _, err := os.Stat(proof); err == nil {
				t.Fatalf("git on the host ran the planted submodule config; quarantined: %+v", r.rep.Quarantined)
			}
			found := false
			for _, q := range r.rep.Quarantined {
				if q.Path == ".git/modules/"+tc.sub+"/config" || q.Path == ".git/modules" || q.Path == ".git/modules/"+tc.sub {
					found = true
				}
			}
			if !found {
				t.Errorf("quarantined %+v: want the plant's config, or .git/modules whole", r.rep.Quarantined)
			}
		})
	}
}
