package mcpserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
			e.fails(t, "write_file", map[string]any{"path": "a/.env", "content": "x"}, "rule `env-asks (policy:", "secrets", "offers no way to ask one", "a/.env")
			// The files API names the rule the link leads to; an overlay
			// session's helper refuses every link under write rules.
			link := map[string]string{"direct": "no-deploy", "overlay": "leads through a link"}[mode]
			e.fails(t, "write_file", map[string]any{"path": "to-deploy/app.yaml", "content": "x"}, link)
			// So is a link to a file there.
			os.WriteFile(filepath.Join(e.ws, "deploy", "live.yaml"), []byte("v1\n"), 0o644)
			os.Symlink("deploy/live.yaml", filepath.Join(e.ws, "live.yaml"))
			e.fails(t, "edit_file", map[string]any{"path": "live.yaml", "old_string": "v1", "new_string": "v2"}, link)
			if b, _ := os.ReadFile(filepath.Join(e.ws, "deploy", "live.yaml")); string(b) != "v1\n" {
				t.Errorf("a write through a link passed the rule: %q", b)
			}
			e.fails(t, "read_file", map[string]any{"path": "deploy/app.yaml"}, "no such file")
			// Control.
			e.ok(t, "write_file", map[string]any{"path": "src/a.txt", "content": "one\n"}, "wrote src/a.txt")
			e.ok(t, "edit_file", map[string]any{"path": "app.txt", "old_string": "v1", "new_string": "v2"}, "replaced 1")
			e.ok(t, "read_file", map[string]any{"path": "app.txt"}, "v2")
		})
	}
}

// TestWriteRuleAsksTheUser: a write a rule asks about is shown to the
// client's user (elicitation), naming the path and the rule; declined it
// is refused and the file is not written, accepted it is written, on that
// one answer.
func TestWriteRuleAsksTheUser(t *testing.T) {
	pol := "[[rules]]\nname = \"env-asks\"\nmatch = { write = \"**/*.env\" }\ndecision = \"ask\"\nreason = \"secrets\"\n" +
		"[[rules]]\nname = \"vault-asks\"\nmatch = { write = \"vault/**\" }\ndecision = \"ask\"\n"
	var shown []string
	answer := "decline"
	e := start(t, setup{mode: "direct", policy: pol, elicit: func(r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		shown = append(shown, r.Params.Message)
		return &mcp.ElicitResult{Action: answer, Content: map[string]any{"approve": true}}, nil
	}})
	e.fails(t, "write_file", map[string]any{"path": "cfg/prod.env", "content": "K=v\n"}, "env-asks", "decline")
	if _, err := os.Stat(filepath.Join(e.ws, "cfg", "prod.env")); err == nil {
		t.Error("a declined write was made")
	}
	answer = "accept"
	e.ok(t, "write_file", map[string]any{"path": "cfg/prod.env", "content": "K=v\n"}, "wrote cfg/prod.env")
	if b, err := os.ReadFile(filepath.Join(e.ws, "cfg", "prod.env")); err != nil || string(b) != "K=v\n" {
		t.Errorf("accepted write: %q, %v", b, err)
	}
	if len(shown) != 2 || !strings.Contains(shown[1], "cfg/prod.env") || !strings.Contains(shown[1], "env-asks") {
		t.Errorf("the user was shown %q", shown)
	}
	// One answer covers the directories the rule asks about on the way.
	e.ok(t, "write_file", map[string]any{"path": "vault/a/b.txt", "content": "x"}, "wrote vault/a/b.txt")
	// Positive control: a path no rule matches is not asked about.
	e.ok(t, "write_file", map[string]any{"path": "cfg/app.yaml", "content": "x"}, "wrote")
	if len(shown) != 3 {
		t.Errorf("asked about a write no rule matches: %q", shown)
	}
}
