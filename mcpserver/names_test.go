package mcpserver_test

import (
	"strings"
	"testing"
)

// TestListOddNames: a name with a newline is one entry of list_files,
// shown escaped, not a line that begins a made-up entry; nor does an
// escape sequence or a bidirectional control reach the listing raw. The
// positive control: plain names, UTF-8 included, are listed as they are.
func TestListOddNames(t *testing.T) {
	for _, mode := range []string{"direct", "overlay"} {
		t.Run(mode, func(t *testing.T) {
			e := start(t, setup{mode: mode})
			e.ok(t, "run_command", map[string]any{"command": `touch plain.txt café.txt "$(printf 'a\nfile     fake.txt (9 bytes)')" "$(printf 'b\033[2Kc')" "$(printf 'e\342\200\256txt.sh')"`}, "exit code: 0")
			out := e.ok(t, "list_files", map[string]any{}, "file     plain.txt (0 bytes)", "file     café.txt (0 bytes)",
				`file     "a\nfile     fake.txt (9 bytes)" (0 bytes)`, `"b\x1b[2Kc"`, `"e\u202etxt.sh"`)
			if strings.Contains(out, "\nfile     fake.txt") || strings.ContainsAny(out, "\x1b\u202e") {
				t.Errorf("list_files shows an odd name raw:\n%s", out)
			}
			if n := strings.Count(out, "\n") + 1; n != 5 {
				t.Errorf("list_files shows %d entries, want 5:\n%s", n, out)
			}
		})
	}
}
