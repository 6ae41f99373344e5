package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// errorLines returns the lines of err, which must be *Errors.
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		t.Fatal("got no error")
	}
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T) is not *Errors", err, err)
	}
	return strings.Split(err.Error(), "\n")
}

// checkErrors checks that err holds exactly one line per entry of want, in
// order, each containing its entry.
func checkErrors(t *testing.T, err error, want []string) {
	t.Helper()
	got := errorLines(t, err)
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), err)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("error %d = %q, want it to contain %q", i, got[i], want[i])
		}
	}
}

// exported returns a copy of p without its unexported bookkeeping, for
// comparisons.
func exported(p *Policy) Policy {
	c := *p
	c.lines, c.flags = nil, nil
	return c
}

func TestDefault(t *testing.T) {
	p := Default()
	if err := p.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	if p.Source != "" || p.Workspace.Path != "." || p.Workspace.Mode != "direct" ||
		p.Network.Mode != "none" || p.Syscalls.Profile != "default" {
		t.Errorf("unexpected defaults: %+v", p)
	}
	if p.Limits.Wall != Duration(10*time.Minute) || p.Limits.CPU != Duration(5*time.Minute) ||
		p.Limits.OpenFiles != 4096 || p.Limits.FileSize != GiB || p.Limits.Output != 16*MiB ||
		p.Limits.Memory != 0 || p.Limits.Pids != 0 || p.Limits.CPUs != 0 || p.Limits.Disk != 0 {
		t.Errorf("unexpected default limits: %+v", p.Limits)
	}
	if p.User != (User{UID: 1000, GID: 1000, HostUID: 2000000000, HostGID: 2000000000}) {
		t.Errorf("unexpected default user: %+v", p.User)
	}
	if p.Env.Set["HOME"] != "/home/agent" || p.Env.Set["USER"] != "agent" {
		t.Errorf("unexpected default env.set: %v", p.Env.Set)
	}
	// Each call returns an independent policy.
	p.Filesystem.ReadOnly[0] = "/changed"
	p.Env.Set["HOME"] = "/changed"
	if q := Default(); q.Filesystem.ReadOnly[0] != "/usr" || q.Env.Set["HOME"] != "/home/agent" {
		t.Error("Default() shares state between calls")
	}
}

func TestParseEmpty(t *testing.T) {
	for _, doc := range []string{"", "# nothing\n", "[limits]\n"} {
		p, err := Parse("empty.toml", []byte(doc))
		if err != nil {
			t.Fatalf("Parse(%q) = %v", doc, err)
		}
		want := Default()
		want.Source = "empty.toml"
		if !reflect.DeepEqual(exported(p), exported(want)) {
			t.Errorf("Parse(%q) = %+v, want the default", doc, p)
		}
	}
}

func TestParseOverlay(t *testing.T) {
	doc := `
[workspace]
mode = "overlay"

[filesystem]
read_write = ["~/.cache/pip"]

[env]
set = { PIP_NO_INPUT = "1" }

[limits]
memory = "2GiB"
wall = 90
cpu = 1.5
pids = 64
cpus = 2
file_size = 1048576
`
	p, err := Parse("pol.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Source = "pol.toml"
	want.Workspace.Mode = "overlay"
	want.Filesystem.ReadWrite = []string{"~/.cache/pip"}
	want.Env.Set["PIP_NO_INPUT"] = "1" // merged: HOME and USER stay
	want.Limits.Memory = 2 * GiB
	want.Limits.Wall = Duration(90 * time.Second)
	want.Limits.CPU = Duration(1500 * time.Millisecond)
	want.Limits.Pids = 64
	want.Limits.CPUs = 2
	want.Limits.FileSize = MiB
	if !reflect.DeepEqual(exported(p), exported(want)) {
		t.Errorf("got  %+v\nwant %+v", exported(p), exported(want))
	}
}

func TestParseListReplacesDefault(t *testing.T) {
	p, err := Parse("pol.toml", []byte("filesystem.read_only = [\"/usr\"]\nenv.pass = []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Filesystem.ReadOnly, []string{"/usr"}) || len(p.Env.Pass) != 0 {
		t.Errorf("lists not replaced: read_only=%v pass=%v", p.Filesystem.ReadOnly, p.Env.Pass)
	}
	if !reflect.DeepEqual(p.Filesystem.Deny, Default().Filesystem.Deny) {
		t.Errorf("unmentioned list changed: %v", p.Filesystem.Deny)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{{
		name: "unknown keys",
		doc:  "[limits]\nwall = \"1m\"\nmemroy = \"1G\"\n\n[netwrok]\nmode = \"none\"\n",
		want: []string{
			"pol.toml:3: limits.memroy: unknown key, did you mean memory? (known keys in [limits]: wall, cpu, open_files, file_size, output, memory, pids, cpus, disk)",
			"pol.toml:5: netwrok: unknown key, did you mean network? (known keys at the top level: workspace,",
		},
	}, {
		name: "unknown key far from everything",
		doc:  "[user]\nname = \"agent\"\n",
		want: []string{"pol.toml:2: user.name: unknown key (known keys in [user]: uid, gid, host_uid, host_gid)"},
	}, {
		name: "unknown dotted and inline keys",
		doc:  "limits.bogus = 1\nworkspace = { mode = \"direct\",\n  extra = true }\n",
		want: []string{
			"pol.toml:1: limits.bogus: unknown key",
			"pol.toml:3: workspace.extra: unknown key",
		},
	}, {
		name: "type errors",
		doc: "[limits]\nmemory = \"12 parsecs\"\nwall = \"forever\"\nopen_files = \"many\"\ncpus = true\n" +
			"output = 1.5\npids = 1.0\n[filesystem]\nread_only = [\"/usr\",\n  42]\ndeny = \"/etc/shadow\"\n" +
			"[env]\nset = { A = 1 }\n[user]\nuid = \"1000\"\n",
		want: []string{
			`pol.toml:2: limits.memory: invalid size "12 parsecs": unknown unit "parsecs"`,
			`pol.toml:3: limits.wall: invalid duration "forever": want Go syntax`,
			`pol.toml:4: limits.open_files: expected an integer, got string "many"`,
			`pol.toml:5: limits.cpus: expected a number, got boolean true`,
			`pol.toml:6: limits.output: expected a size (a number of bytes, or a string such as "512MiB"), got float 1.5`,
			`pol.toml:7: limits.pids: expected an integer, got float 1`,
			`pol.toml:10: filesystem.read_only[1]: expected a string, got integer 42`,
			`pol.toml:11: filesystem.deny: expected an array of strings, got string "/etc/shadow"`,
			`pol.toml:13: env.set.A: expected a string, got integer 1`,
			`pol.toml:15: user.uid: expected an integer, got string "1000"`,
		},
	}, {
		name: "section of the wrong type",
		doc:  "limits = 5\n",
		want: []string{"pol.toml:1: limits: expected a table, got integer 5"},
	}, {
		name: "negative numbers",
		doc:  "[limits]\nmemory = -1\nwall = -5\ncpu = -0.5\ndisk = \"-1G\"\n",
		want: []string{
			"pol.toml:2: limits.memory: invalid size -1: must not be negative",
			"pol.toml:3: limits.wall: invalid duration -5: must not be negative",
			"pol.toml:4: limits.cpu: invalid duration -0.5: must not be negative",
			`pol.toml:5: limits.disk: invalid size "-1G": must not be negative`,
		},
	}, {
		// A number written non-zero that reads as 0 would be no limit.
		name: "non-zero limits that round to zero",
		doc: "[limits]\ncpus = 1e-400\noutput = \"0.0001KiB\"\nfile_size = \"0.0004k\"\nwall = 1e-400\n" +
			"memory = \"0.0000000001G\"\ndisk = \"0.0000000001G\"\ncpu = 0.1e-1_000\n",
		want: []string{
			"pol.toml:2: limits.cpus: 1e-400 rounds to zero, which means no limit; write 0 for no limit",
			`pol.toml:3: limits.output: invalid size "0.0001KiB": rounds down to 0 bytes, which means no limit; use at least 1 byte, or 0 for no limit`,
			`pol.toml:4: limits.file_size: invalid size "0.0004k": rounds down to 0 bytes`,
			"pol.toml:5: limits.wall: 1e-400 rounds to zero",
			`pol.toml:6: limits.memory: invalid size "0.0000000001G": rounds down to 0 bytes`,
			`pol.toml:7: limits.disk: invalid size "0.0000000001G": rounds down to 0 bytes`,
			"pol.toml:8: limits.cpu: 0.1e-1_000 rounds to zero",
		},
	}, {
		name: "huge duration",
		doc:  "limits.wall = 9223372036854775807\n",
		want: []string{"pol.toml:1: limits.wall: invalid duration 9223372036854775807: too long"},
	}, {
		name: "syntax error",
		doc:  "[workspace]\nmode = \"direct\"\n\n[limits\nmemory = \"1G\"\n",
		want: []string{"pol.toml:4: syntax error: "},
	}, {
		name: "duplicate key",
		doc:  "[limits]\nwall = \"1m\"\nwall = \"2m\"\n",
		want: []string{"pol.toml:3: syntax error: "},
	}, {
		name: "unterminated string",
		doc:  "[limits]\nwall = \"1m\n",
		want: []string{"pol.toml:2: syntax error: "},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("pol.toml", []byte(tt.doc))
			if p != nil {
				t.Errorf("Parse returned a policy with an error")
			}
			checkErrors(t, err, tt.want)
		})
	}
}

func TestLoadFixtures(t *testing.T) {
	tests := []struct {
		file string
		want []string // parse errors; nil if the file parses
	}{
		{"full.toml", nil},
		{"bad_values.toml", nil}, // parses; Validate rejects it
		{"bad_unknown.toml", []string{
			"testdata/bad_unknown.toml:6: limits.memroy: unknown key, did you mean memory?",
			"testdata/bad_unknown.toml:9: netwrok: unknown key, did you mean network?",
		}},
		{"bad_types.toml", []string{
			`testdata/bad_types.toml:3: limits.memory: invalid size "12 parsecs"`,
			`testdata/bad_types.toml:4: limits.wall: invalid duration "forever"`,
			`testdata/bad_types.toml:5: limits.open_files: expected an integer, got string "many"`,
			`testdata/bad_types.toml:6: limits.cpus: expected a number, got boolean true`,
			`testdata/bad_types.toml:9: filesystem.read_only[1]: expected a string, got integer 42`,
		}},
		{"bad_syntax.toml", []string{"testdata/bad_syntax.toml:4: syntax error: "}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			p, err := Load(path)
			if tt.want != nil {
				checkErrors(t, err, tt.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Source != path {
				t.Errorf("Source = %q, want %q", p.Source, path)
			}
		})
	}
}

func TestLoadFull(t *testing.T) {
	p, err := Load("testdata/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := Policy{
		Workspace: Workspace{Path: "project", Mode: "overlay", Protect: []string{".git/hooks", ".git/config", ".envrc"}},
		Filesystem: Filesystem{
			ReadOnly:  []string{"/usr", "/bin", "/lib", "/lib64", "/etc", "/opt/tools"},
			ReadWrite: []string{"~/.cache/pip"},
			Deny:      []string{"/etc/shadow", "/etc/gshadow", "/etc/ssh"},
			Landlock:  "required",
		},
		Env: Env{
			Pass: []string{"PATH", "LANG", "LC_*", "TERM", "TZ", "PIP_*"},
			Set:  map[string]string{"HOME": "/home/agent", "USER": "agent", "PIP_NO_INPUT": "1"},
		},
		Network: Network{
			Mode:       "allow",
			Allow:      []string{"pypi.org", "*.pythonhosted.org", "api.github.com:443"},
			Deny:       []string{"upload.pypi.org"},
			AllowCIDRs: []string{"10.1.2.0/24"}, HTTPSOnly: true, Transparent: true,
		},
		Limits: Limits{
			Wall: Duration(15 * time.Minute), CPU: Duration(2 * time.Minute), OpenFiles: 1024,
			FileSize: 512 * MiB, Output: 8 * MiB, Memory: 2 * GiB, Pids: 512, CPUs: 1.5, Disk: 4 * GiB,
		},
		Syscalls: Syscalls{Profile: "profiles/seccomp.json"},
		User:     User{UID: 1001, GID: 1001, HostUID: 1500000000, HostGID: 1500000000},
		Harness:  Harness{Builtin: []string{BuiltinIrreversible}},
		Sandbox:  Sandbox{Isolation: IsolationNative},
		Rules:    []Rule{},
		Secrets:  []Secret{},
		Source:   "testdata/full.toml",
	}
	if !reflect.DeepEqual(exported(p), want) {
		t.Errorf("got  %+v\nwant %+v", exported(p), want)
	}
	// Positions of table headers, keys, array elements and inline keys.
	for key, line := range map[string]int{
		"workspace": 4, "workspace.mode": 6, "workspace.protect": 8, "workspace.protect[2]": 11,
		"env.set": 23, "env.set.PIP_NO_INPUT": 23, "limits.disk": 41, "user.host_gid": 50, "network.https_only": 30, "filesystem.landlock": 18,
	} {
		if got := p.lines[key]; got != line {
			t.Errorf("line of %s = %d, want %d", key, got, line)
		}
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want an error wrapping os.ErrNotExist", err)
	}
}

func TestTOMLRoundTrip(t *testing.T) {
	full, err := Load("testdata/full.toml")
	if err != nil {
		t.Fatal(err)
	}
	edited := Default()
	edited.Limits.Memory = 1536 * MiB
	edited.Limits.CPUs = 0.25
	edited.Limits.Wall = Duration(90*time.Second + 500*time.Millisecond)
	// env.set is merged into the default when parsed, so a rendered policy
	// keeps the default keys to round-trip.
	edited.Env.Set = map[string]string{"A B": "quoted key", "HOME": "/h", "USER": "agent"}
	edited.Filesystem.ReadWrite = nil
	for name, p := range map[string]*Policy{"default": Default(), "full": full, "edited": edited} {
		t.Run(name, func(t *testing.T) {
			doc, err := p.TOML()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse("shown.toml", doc)
			if err != nil {
				t.Fatalf("Parse(TOML()) = %v\n%s", err, doc)
			}
			want := exported(p)
			want.Source = "shown.toml"
			if want.Filesystem.ReadWrite == nil {
				want.Filesystem.ReadWrite = []string{}
			}
			if !reflect.DeepEqual(exported(back), want) {
				t.Errorf("round trip changed the policy:\ngot  %+v\nwant %+v\n%s", exported(back), want, doc)
			}
		})
	}
}

// TestTooManyKeys: go-toml checks for keys defined twice with a scan of the
// keys seen so far, so a document of many keys (a megabyte of env.set
// entries took minutes) is refused before it is decoded.
func TestTooManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("[env.set]\n")
	for i := 0; i < maxKeys; i++ {
		fmt.Fprintf(&b, "V%d = \"x\"\n", i)
	}
	_, err := Parse("p.toml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "p.toml:4096: more than 4096 keys") {
		t.Fatalf("Parse(%d env.set keys) = %v, want the bound named at line 4096", maxKeys, err)
	}
	b.Reset()
	b.WriteString("[env.set]\n")
	for i := 0; i < maxKeys-2; i++ { // the header's two keys count
		fmt.Fprintf(&b, "V%d = \"x\"\n", i)
	}
	if _, err := Parse("p.toml", []byte(b.String())); err != nil {
		t.Fatalf("Parse(%d keys) = %v, want no error", maxKeys, err)
	}
}

// TestLongKeysBounded: a dotted key of many parts, or a long key before
// many others (array elements, an object's members), is each of its
// prefixes written out whole, and was read in time and memory that grew
// with the square of its length (a 1 MB policy took gigabytes, and a
// daemon's tenant killed the daemon so): refused by their length in all,
// in TOML and JSON. The control: a policy of thousands of hosts.
func TestLongKeysBounded(t *testing.T) {
	long := strings.Repeat("b", 100000)
	for name, doc := range map[string]string{
		"p.toml": "[" + strings.Repeat("a.", 500000) + "a]\nx = 1\n",
		"q.toml": "[\"" + long + "\"]\nx = [" + strings.Repeat("1,", 100000) + "1]\n",
		"r.toml": "x = { \"" + long + "\" = [" + strings.Repeat("1,", 100) + "1] }\n",
		"p.json": `{"` + long + `": {` + jsonMembers(200) + `}}`,
		"q.json": `{"` + long + `": [` + strings.Repeat("1,", 100) + `1]}`,
	} {
		_, err := ParseDocument(name, []byte(doc))
		if err == nil || !strings.Contains(err.Error(), "keys of more than") {
			t.Errorf("%s: %v, want the keys' length refused", name, err)
		}
	}
	var b strings.Builder
	b.WriteString("[network]\nmode = \"allow\"\nallow = [")
	for i := range 3000 {
		fmt.Fprintf(&b, "\"host%d.example.com\", ", i)
	}
	b.WriteString("]\n")
	if _, err := Parse("p.toml", []byte(b.String())); err != nil {
		t.Errorf("control: 3000 hosts: %v", err)
	}
}

func jsonMembers(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"k%d": 1`, i)
	}
	return b.String()
}

// TestParseZeroAndSmallNumbers is the control for the refusal of numbers
// that round to zero: zero written as a float or a fraction is still 0
// (no limit), and small values that are not zero keep their value.
func TestParseZeroAndSmallNumbers(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want Limits
	}{
		{"[limits]\ncpus = 0.0\nwall = 0.0\noutput = \"0K\"\nfile_size = \"0.0G\"\n", Limits{}},
		{"[limits]\ncpus = 0e5\nwall = 0\noutput = 0\nfile_size = 0\n", Limits{}},
		{"[limits]\ncpus = 0.5\nwall = 1e-9\noutput = \"1K\"\nfile_size = \"0.001K\"\n", Limits{CPUs: 0.5, Wall: 1, Output: KiB, FileSize: 1}},
		{"[limits]\ncpus = 2_0.0\nwall = 2.5\noutput = \"1.5G\"\nfile_size = 1\n", Limits{CPUs: 20, Wall: Duration(2500 * time.Millisecond), Output: GiB + GiB/2, FileSize: 1}},
		{`{"limits": {"cpus": 0.0, "wall": 0e3, "output": "0.0K", "file_size": 0}}`, Limits{}},
		{`{"limits": {"cpus": 0.25, "wall": 1e-9, "output": "0.001K", "file_size": "1K"}}`, Limits{CPUs: 0.25, Wall: 1, Output: 1, FileSize: KiB}},
	} {
		p, err := ParseDocument("pol", []byte(tc.doc))
		if err != nil {
			t.Errorf("%q: %v", tc.doc, err)
			continue
		}
		got := p.Limits
		if got.CPUs != tc.want.CPUs || got.Wall != tc.want.Wall || got.Output != tc.want.Output || got.FileSize != tc.want.FileSize {
			t.Errorf("%q: limits %+v, want %+v", tc.doc, got, tc.want)
		}
	}
}
