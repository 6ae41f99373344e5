package sandbox_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestReadOnlyPathKeepsItsPlace: a read-only path inside a writable tree
// (the workspace, or a read_write directory) keeps its place: the
// directories above it are pinned, so the command can neither move one
// aside nor make its own file at the path (the read-only mount went with
// the renamed directory, and the host then read the command's file
// there, found by a tester). A denied path keeps its place the same way:
// its mask went with the renamed directory, and a daemon's files API then
// handed out the real file by its new name (found by a tester). The
// control: without either entry the same script moves the directory and
// plants the file.
func TestReadOnlyPathKeepsItsPlace(t *testing.T) {
	const script = `cd "$1" && mv conf conf.old; mkdir -p conf; echo evil > conf/settings.json; true`
	for _, where := range []string{"workspace", "read_write"} {
		t.Run(where, func(t *testing.T) {
			for _, kind := range []string{"read_only", "deny", ""} {
				ro := kind != ""
				ws := t.TempDir()
				tree := ws
				if where == "read_write" {
					tree = t.TempDir()
				}
				file := filepath.Join(tree, "conf", "settings.json")
				os.MkdirAll(filepath.Dir(file), 0o755)
				if err := os.WriteFile(file, []byte("good\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				r := run(t, ws, func(p *policy.Policy) {
					if tree != ws {
						p.Filesystem.ReadWrite = append(p.Filesystem.ReadWrite, tree)
					}
					switch kind {
					case "read_only":
						p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, file)
					case "deny":
						p.Filesystem.Deny = append(p.Filesystem.Deny, file)
					}
				}, "/bin/sh", "-c", script, "sh", tree)
				mustExit(t, r, 0)
				b, _ := os.ReadFile(file)
				_, moved := os.Lstat(filepath.Join(tree, "conf.old"))
				switch {
				case ro && (string(b) != "good\n" || moved == nil):
					t.Errorf("%s: %s holds %q, conf.old there: %v; want it kept in place\nstderr: %s", kind, file, b, moved == nil, r.stderr)
				case !ro && (string(b) != "evil\n" || moved != nil):
					t.Errorf("control: %s holds %q, conf.old there: %v; want it moved and planted", file, b, moved == nil)
				}
			}
		})
	}
}
