package mcpserver_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteRules: write_file and edit_file are decided by the policy's
// write rules, in either mode: a denied path gives a tool result naming
// the rule and is not written, an ask with nobody to ask is refused, a
// link inside the workspace does not carry a write past a rule.
// Positive control: a path no rule matches is written and edited.
func TestWriteRules(t *testing.T) {
	pol := `
[[rules]]
name = "no-deploy"
match = { write = "deploy/**" }
decision = "deny"
reason = "deploy files go live"

[[rules]]
name = "env-asks"
match = { write = "**/*.env" }
decision = "ask"
reason = "secrets"
`
	for _, mode := range []string{"direct", "overlay"} {
		t.Run(mode, func(t *testing.T) {
			e := start(t, setup{mode: mode, policy: pol, files: map[string]string{"app.txt": "v1\n"}})
			if err := os.Symlink("deploy", filepath.Join(e.ws, "to-deploy")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(e.ws, "deploy"), 0o755); err != nil {
				t.Fatal(err)
			}
			e.fails(t, "write_file", map[string]any{"path": "deploy/app.yaml", "content": "x"}, "no-deploy", "deploy files go live")
			e.fails(t, "write_file", map[string]any{"path": "a/.env", "content": "x"}, "env-asks", "nobody can be asked")
			// The files API names the rule the link leads to; an overlay
			// session's helper refuses every link under write rules.
			link := map[string]string{"direct": "no-deploy", "overlay": "leads through a link"}[mode]
			e.fails(t, "write_file", map[string]any{"path": "to-deploy/app.yaml", "content": "x"}, link)
			e.fails(t, "read_file", map[string]any{"path": "deploy/app.yaml"}, "no such file")
			// Control.
			e.ok(t, "write_file", map[string]any{"path": "src/a.txt", "content": "one\n"}, "wrote src/a.txt")
			e.ok(t, "edit_file", map[string]any{"path": "app.txt", "old_string": "v1", "new_string": "v2"}, "replaced 1")
			e.ok(t, "read_file", map[string]any{"path": "app.txt"}, "v2")
		})
	}
}
