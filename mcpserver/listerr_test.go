package mcpserver_test

import (
	"strings"
	"testing"
)

// TestListFilesFindFails: in a session whose files only its sandbox sees,
// list_files runs find piped to head, and sh has no pipefail: a directory
// find could not read left a listing cut short that read as whole (an
// empty one, for the directory itself). find's failure is now the tool's
// error, naming paths relative to the workspace only. The positive
// controls: readable directories list, and a listing cut at its bound
// (head ending find early) is still a success.
func TestListFilesFindFails(t *testing.T) {
	for _, mode := range []string{"overlay", "copy"} {
		t.Run(mode, func(t *testing.T) {
			e := start(t, setup{mode: mode})
			e.ok(t, "run_command", map[string]any{"command": "mkdir -p d/open d/locked/inner && touch d/open/f d/locked/inner/g && chmod 000 d/locked && " +
				"mkdir -p many/sub && cd many/sub && seq 2500 | xargs touch"}, "exit code: 0")

			e.ok(t, "list_files", map[string]any{"path": "d/open"}, "file     d/open/f (0 bytes)")
			e.ok(t, "list_files", map[string]any{"path": "d"}, "dir      d/locked/", "dir      d/open/")
			out := e.ok(t, "list_files", map[string]any{"path": "many", "recursive": true}, "dir      many/sub/", "more entries left out")
			if n := strings.Count(out, "\n"); n != 2000 {
				t.Errorf("a recursive list_files of 2501 entries shows %d lines", n)
			}

			text := e.fails(t, "list_files", map[string]any{"path": "d", "recursive": true}, "could not list all of d", "./locked", "Permission denied")
			if strings.Contains(text, "d/open/f") || strings.Contains(text, e.ws) {
				t.Errorf("the failed listing shows entries or a host path:\n%s", text)
			}
			e.fails(t, "list_files", map[string]any{"path": "d/locked"}, "cannot enter the directory d/locked")
			e.fails(t, "list_files", map[string]any{"path": "d/open/f"}, "d/open/f is not a directory")
		})
	}
}
