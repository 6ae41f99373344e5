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
// int), and a null Go's reflection ("<invalid reflect.Value>"), tried.
func TestArgumentTypeErrorsPlain(t *testing.T) {
	e := start(t, setup{})
	e.ok(t, "write_file", map[string]any{"path": "a.txt", "content": "x\n"}, "wrote")
	for _, args := range []map[string]any{
		{"path": "a.txt", "offset": 1e20},
		{"path": "a.txt", "offset": "ten"},
		{"path": "a.txt", "offset": nil},
	} {
		text := e.fails(t, "read_file", args, "offset")
		if strings.Contains(text, "Go struct") || strings.Contains(text, "mcpserver.") || strings.Contains(text, "reflect") || !strings.Contains(text, "integer") {
			t.Errorf("read_file %v: %s", args, text)
		}
	}
}

// TestFileToolsUnderTheSessionsLimits: in an overlay session the file
// tools read and write through a command in the sandbox, under the
// session's limits. A file past the output limit is refused, not read
// cut short (an edit wrote the first 64 KiB back as the whole file, and
// apply then cut the host's); a write the disk or file-size limit stops
// leaves the file as it was, not cut (found by a tester). The controls:
// a file within the output limit is read and edited whole, a write
// within the limits is made, and a new file gets the usual mode.
func TestFileToolsUnderTheSessionsLimits(t *testing.T) {
	e := start(t, setup{mode: "overlay", policy: "[limits]\noutput = \"64KiB\"\n"})
	e.ok(t, "run_command", map[string]any{"command": "seq 14000 > over && seq 9000 > within && chmod 640 within"}, "exit code: 0")
	e.fails(t, "read_file", map[string]any{"path": "over"}, "output limit")
	e.fails(t, "edit_file", map[string]any{"path": "over", "old_string": "\n13999\n", "new_string": "\nX\n"}, "output limit")
	e.ok(t, "run_command", map[string]any{"command": "wc -c < over; tail -n 1 over"}, "72894\n14000\n")
	e.ok(t, "read_file", map[string]any{"path": "within", "offset": 9000}, "9000")
	e.ok(t, "edit_file", map[string]any{"path": "within", "old_string": "\n8999\n", "new_string": "\nX\n"}, "replaced 1")
	e.ok(t, "run_command", map[string]any{"command": "tail -n 2 within; stat -c %a within"}, "X\n9000\n640\n")
	// Past file_size (4 KiB): refused, the file untouched.
	t.Run("file_size", func(t *testing.T) { fileSizeStopsWrite(t) })
}

func fileSizeStopsWrite(t *testing.T) {
	e := start(t, setup{mode: "overlay", policy: "[limits]\nfile_size = \"4KiB\"\n"})
	e.ok(t, "run_command", map[string]any{"command": "seq 1000 > keep"}, "exit code: 0")
	e.fails(t, "write_file", map[string]any{"path": "keep", "content": strings.Repeat("B", 6000)}, "keep is unchanged: the write failed", "limits.file_size")
	e.ok(t, "run_command", map[string]any{"command": "wc -c < keep; tail -n 1 keep; ls -a | grep -c moat-write"}, "3893\n1000\n0\n")
	e.ok(t, "write_file", map[string]any{"path": "new.txt", "content": "n\n"}, "wrote")
	e.ok(t, "run_command", map[string]any{"command": "stat -c %a new.txt"}, "644\n")
}
