package mcpserver_test

import (
	"strings"
	"testing"
)

// TestFileToolLimits: the file tools keep the files API's size bound in
// every mode, and know an edit's size before they make it. An edit that
// replaces a short string everywhere by a long one asked the server for
// more memory than the machine has, which ended it with a Go stack
// trace; an overlay session's reads went around the bound (its files do
// not pass through the files API), and reading a FIFO there waited for
// the wall-clock limit. The positive controls: an edit
// that grows a file within the bound, a read of a file within it.
func TestFileToolLimits(t *testing.T) {
	for _, mode := range []string{"direct", "overlay"} {
		t.Run(mode, func(t *testing.T) {
			e := start(t, setup{mode: mode})
			const mib = 1 << 20
			e.ok(t, "run_command", map[string]any{"command": "head -c 1048576 /dev/zero | tr '\\0' a > big && head -c 17825792 /dev/zero | tr '\\0' a > huge && mkfifo fifo"}, "exit code: 0")

			// Every "a" by a MiB: a TiB, were it made.
			e.fails(t, "edit_file", map[string]any{"path": "big", "old_string": "a", "new_string": strings.Repeat("b", mib), "replace_all": true},
				"the edit would make big 1099511627776 bytes, over the file tools' limit")
			e.fails(t, "edit_file", map[string]any{"path": "big", "old_string": "aa", "new_string": strings.Repeat("b", 64), "replace_all": true}, "over the file tools' limit")
			e.ok(t, "run_command", map[string]any{"command": "wc -c < big"}, "1048576\n")
			e.ok(t, "edit_file", map[string]any{"path": "big", "old_string": "a", "new_string": "bb", "replace_all": true}, "replaced 1048576")
			e.ok(t, "run_command", map[string]any{"command": "wc -c < big"}, "2097152\n")

			e.fails(t, "read_file", map[string]any{"path": "huge"}, "over", "16777216")
			e.ok(t, "read_file", map[string]any{"path": "big", "limit": 1}, "     1\tbbbb")
			e.fails(t, "read_file", map[string]any{"path": "fifo"}, "not a regular file")
			// A write to it (or through a link to it) is refused at once too:
			// before, an overlay session's write waited for a reader and
			// then wrote into it, tried.
			e.ok(t, "run_command", map[string]any{"command": "ln -s fifo fifolink"}, "exit code: 0")
			e.fails(t, "write_file", map[string]any{"path": "fifo", "content": "x"}, "not a regular file")
			e.fails(t, "write_file", map[string]any{"path": "fifolink", "content": "x"}, "not a regular file")

			// A listing is cut at its bound, whatever the mode.
			e.ok(t, "run_command", map[string]any{"command": "mkdir many && cd many && seq 2500 | xargs touch"}, "exit code: 0")
			out := e.ok(t, "list_files", map[string]any{"path": "many"}, "more entries left out")
			if n := strings.Count(out, "\n"); n != 2000 {
				t.Errorf("list_files of 2500 entries shows %d lines", n)
			}
		})
	}
}

// TestArgumentTypeErrorsPlain: an argument out of its type's range, or
// of the wrong type, is said in the tool's terms; before, the result
// named Go's struct, field and type (mcpserver.readIn.offset of type
// int), tried.
func TestArgumentTypeErrorsPlain(t *testing.T) {
	e := start(t, setup{})
	e.ok(t, "write_file", map[string]any{"path": "a.txt", "content": "x\n"}, "wrote")
	for _, args := range []map[string]any{
		{"path": "a.txt", "offset": 1e20},
		{"path": "a.txt", "offset": "ten"},
	} {
		text := e.fails(t, "read_file", args, "offset")
		if strings.Contains(text, "Go struct") || strings.Contains(text, "mcpserver.") {
			t.Errorf("read_file %v: %s", args, text)
		}
	}
}
