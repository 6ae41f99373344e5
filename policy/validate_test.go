package policy

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidateReportsEverythingWithLines(t *testing.T) {
	p, err := Load("testdata/bad_values.toml")
	if err != nil {
		t.Fatal(err)
	}
	const f = "testdata/bad_values.toml"
	checkErrors(t, p.Validate(), []string{
		f + `:3: workspace.mode: "snapshot" is not one of direct, readonly, overlay`,
		f + `:4: workspace.protect[0]: "/etc/passwd" is absolute; protect entries are relative to the workspace`,
		f + `:4: workspace.protect[1]: "../sibling" is outside the workspace`,
		f + `:7: filesystem.read_write[0]: "relative/dir" is relative; host paths must be absolute or start with "~/"`,
		f + `:10: env.set."BAD=NAME": "BAD=NAME" is not a valid variable name`,
		f + `:14: network.allow[0]: "https://pypi.org": not a destination: write a host name without a scheme or a path`,
		f + `:14: network.allow[1]: "": empty entry`,
		f + `:15: network.allow_cidrs[0]: "10.0.0.0/33": not an address range`,
		f + `:16: network.tcp_bind[1]: -1 is not a TCP port (0 to 65535)`,
		f + `:19: limits.cpus: 2048 is too many (max 1024)`,
		f + `:20: limits.open_files: 2000000 is too many (max 1048576)`,
		f + `:21: limits.memory: 512B is too small (min 1MiB, or 0 for no limit); a size without a unit is in bytes`,
		f + `:24: syscalls.profile: "permissive" is not one of default, strict, unconfined, or the path of a JSON profile`,
		f + `:27: user.uid: 0 is root; moat never runs a command as root inside the sandbox`,
		f + `:28: user.host_gid: 0 is root; moat never runs a command as root on the host`,
	})
}

func TestValidateFields(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(p *Policy)
		wantErr string // "" if valid
	}{
		{"default", func(p *Policy) {}, ""},
		{"readonly workspace", func(p *Policy) { p.Workspace.Mode = "readonly" }, ""},
		{"empty workspace path", func(p *Policy) { p.Workspace.Path = "" }, "workspace.path: must not be empty"},
		{"NUL in workspace path", func(p *Policy) { p.Workspace.Path = "a\x00b" }, "workspace.path: must not contain a NUL byte"},
		{"protect the workspace", func(p *Policy) { p.Workspace.Protect = []string{"./"} }, `use workspace.mode = "readonly"`},
		{"protect escaping via clean", func(p *Policy) { p.Workspace.Protect = []string{"a/../../b"} }, "outside the workspace"},
		{"protect inner dots", func(p *Policy) { p.Workspace.Protect = []string{"a/../b", "..x"} }, ""},
		{"empty protect entry", func(p *Policy) { p.Workspace.Protect = []string{""} }, "workspace.protect[0]: must not be empty"},
		{"home paths", func(p *Policy) { p.Filesystem.ReadWrite = []string{"~", "~/.cache"} }, ""},
		{"other user's home", func(p *Policy) { p.Filesystem.ReadOnly = []string{"~bob/x"} }, `"~bob/x": only "~/"`},
		{"relative deny", func(p *Policy) { p.Filesystem.Deny = []string{"etc"} }, `filesystem.deny[0]: "etc" is relative`},
		{"bad env pattern", func(p *Policy) { p.Env.Pass = []string{"LC_["} }, `env.pass[0]: "LC_[" is not a valid name pattern`},
		{"env pattern with =", func(p *Policy) { p.Env.Pass = []string{"A=B"} }, `env.pass[0]`},
		{"empty env name", func(p *Policy) { p.Env.Set[""] = "x" }, `env.set."": "" is not a valid variable name`},
		{"NUL in env value", func(p *Policy) { p.Env.Set["X"] = "a\x00" }, "env.set.X: value must not contain a NUL byte"},
		{"network modes", func(p *Policy) { p.Network.Mode = "host" }, ""},
		{"bad network mode", func(p *Policy) { p.Network.Mode = "all" }, `network.mode: "all" is not one of none, allow, host`},
		{"good destinations", func(p *Policy) {
			p.Network.Mode = NetworkAllow
			p.Network.Allow = []string{"pypi.org", "*.pythonhosted.org", "api.github.com:443", "db", "db:5432"}
			p.Network.Deny = []string{"*.co.uk", "db"}
		}, ""},
		// The workspace is shown as its mode says: a list naming it, or a
		// deny at or above it, is refused; a deny beside it is not.
		{"workspace read-only", func(p *Policy) {
			p.Workspace.Path = "/srv/ws"
			p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, "/srv/ws/")
		}, `is the workspace, which workspace.mode shows`},
		{"workspace writable", func(p *Policy) { p.Workspace.Path = "/srv/ws"; p.Filesystem.ReadWrite = []string{"/srv/ws"} }, `filesystem.read_write[0]: "/srv/ws" is the workspace`},
		{"deny above the workspace", func(p *Policy) { p.Workspace.Path = "/srv/ws"; p.Filesystem.Deny = append(p.Filesystem.Deny, "/srv") }, `"/srv" would hide the workspace /srv/ws`},
		{"deny beside the workspace", func(p *Policy) {
			p.Workspace.Path = "/srv/ws"
			p.Filesystem.Deny = append(p.Filesystem.Deny, "/srv/other", "/srv/wsx")
		}, ""},
		// The grammar the egress proxy reads: what it refuses, Validate refuses.
		{"allow everything", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.Allow = []string{"*"} }, `network.allow[0]: "*": "*" matches every host`},
		{"allow a tld", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.Allow = []string{"*.com"} }, `network.allow[0]: "*.com": too broad: "com" is a top-level domain`},
		{"allow an address", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.Allow = []string{"db", "10.0.0.1:80"} }, `network.allow[1]: "10.0.0.1:80": an IP address is not a host name; put addresses in allow_cidrs`},
		{"allow an IPv6 address", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.Allow = []string{"fd00::1"} }, `network.allow[0]: "fd00::1": an IP address is not a host name`},
		// Two ports: a mistake of form, not an address (it said address).
		{"allow two ports", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.Allow = []string{"vm:8080:9000"} }, `network.allow[0]: "vm:8080:9000": more than one ':': write HOST or HOST:PORT`},
		{"allow ipv6", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.Allow = []string{"[::1]:443"} }, `put addresses in allow_cidrs`},
		{"numeric last label", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.Allow = []string{"example.123"} }, `last label is a number`},
		{"bad port", func(p *Policy) { p.Network.Deny = []string{"example.com:99999"} }, `network.deny[0]: "example.com:99999": port "99999" is not a number from 1 to 65535`},
		{"bad host", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.Allow = []string{"exa mple.com"} }, "host name contains ' '"},
		{"empty label", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.Allow = []string{"a..b"} }, "host name has an empty label"},
		{"host bits", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.AllowCIDRs = []string{"10.1.2.3/24"} }, `did you mean "10.1.2.0/24"?`},
		{"ipv6 cidr", func(p *Policy) { p.Network.Mode = NetworkAllow; p.Network.AllowCIDRs = []string{"fd00::/8"} }, ""},
		// A list under network.mode "none" would let nothing through
		// without a word (the default mode: a list alone was silently
		// unused); a --net none over it is an override (the control).
		{"allow without mode", func(p *Policy) { p.Network.Allow = []string{"example.com"} }, `network.allow: is read only when network.mode is "allow" (it is "none"`},
		{"cidrs without mode", func(p *Policy) { p.Network.AllowCIDRs = []string{"10.0.0.0/8"} }, `network.allow_cidrs: is read only when network.mode is "allow"`},
		{"none by flag", func(p *Policy) { p.Network.Allow = []string{"example.com"}; p.MarkFlag("network.mode", "--net") }, ""},
		{"tcp ports", func(p *Policy) { p.Network.TCPBind, p.Network.TCPConnect = &[]int{0, 8080}, &[]int{} }, ""},
		{"bad bind port", func(p *Policy) { p.Network.TCPBind = &[]int{80, 70000} }, "network.tcp_bind[1]: 70000 is not a TCP port (0 to 65535)"},
		{"connect port 0", func(p *Policy) { p.Network.TCPConnect = &[]int{0} }, "network.tcp_connect[0]: 0 is not a TCP port (1 to 65535)"},
		{"tcp ports without landlock", func(p *Policy) {
			p.Network.TCPConnect = &[]int{443}
			p.Filesystem.Landlock = "off"
		}, `network.tcp_connect: TCP port rules are enforced by Landlock, which filesystem.landlock = "off" turns off`},
		{"tcp ports without a filter", func(p *Policy) {
			p.Network.TCPBind = &[]int{}
			p.Syscalls.Profile = "unconfined"
		}, `network.tcp_bind: TCP port rules hold only while MPTCP sockets, which Landlock does not see, are refused`},
		{"tcp ports with the strict filter", func(p *Policy) {
			p.Network.TCPBind = &[]int{}
			p.Syscalls.Profile = "strict"
		}, ""},
		{"negative wall", func(p *Policy) { p.Limits.Wall = -1 }, "limits.wall: -1 is negative; use 0 for no limit"},
		{"negative pids", func(p *Policy) { p.Limits.Pids = -1 }, "limits.pids: -1 is negative"},
		// The kernel counts CPU time in whole seconds: 1.5s was 2s, and
		// the kill message said 1.5s (found by a tester).
		{"fractional cpu", func(p *Policy) { p.Limits.CPU = Duration(1500 * time.Millisecond) }, "limits.cpu: 1.5s is not a whole number of seconds, which is how the kernel counts CPU time (RLIMIT_CPU); use 1s or 2s"},
		{"tiny cpu", func(p *Policy) { p.Limits.CPU = 1 }, "limits.cpu: 1ns is not a whole number of seconds, which is how the kernel counts CPU time (RLIMIT_CPU); use 1s"},
		{"whole cpu", func(p *Policy) { p.Limits.CPU = Duration(90 * time.Second) }, ""},
		// RLIMIT_CPU set from 9223372036s overflowed (found by a tester).
		{"huge cpu", func(p *Policy) { p.Limits.CPU = Duration(9223372036 * time.Second) }, "limits.cpu: 2562047h47m16s is more than the most moat sets (8760h0m0s)"},
		// A session spends a CPU budget by its own count, fractions
		// included; a run's is rounded up to whole seconds (RLIMIT_CPU).
		{"fractional cpu budget", func(p *Policy) { p.Budgets.CPU = Duration(1500 * time.Millisecond) }, ""},
		{"huge cpu budget", func(p *Policy) { p.Budgets.CPU = Duration(9223372036 * time.Second) }, "budgets.cpu: 2562047h47m16s is more than the most moat sets (8760h0m0s)"},
		{"too many pids", func(p *Policy) { p.Limits.Pids = 1 << 23 }, "limits.pids: 8388608 is too many"},
		{"too few pids", func(p *Policy) { p.Limits.Pids = 1 }, "limits.pids: 1 is too few (min 2)"},
		{"too few open files", func(p *Policy) { p.Limits.OpenFiles = 5 }, "limits.open_files: 5 is too few (min 32)"},
		{"fewest open files and pids", func(p *Policy) { p.Limits.OpenFiles, p.Limits.Pids = 32, 2 }, ""},
		{"negative open files", func(p *Policy) { p.Limits.OpenFiles = -1 }, "limits.open_files: -1 is negative"},
		{"negative output", func(p *Policy) { p.Limits.Output = -1 }, "limits.output: -1 is negative"},
		{"tiny disk", func(p *Policy) { p.Limits.Disk = 10 * KiB }, "limits.disk: 10KiB is too small"},
		{"cgroup limits", func(p *Policy) { p.Limits.Memory, p.Limits.Pids, p.Limits.CPUs, p.Limits.Disk = GiB, 100, 0.5, GiB }, ""},
		{"NaN cpus", func(p *Policy) { p.Limits.CPUs = math.NaN() }, "limits.cpus: NaN is not a number of CPUs"},
		{"negative cpus", func(p *Policy) { p.Limits.CPUs = -1 }, "limits.cpus: -1 is negative"},
		{"tiny cpus", func(p *Policy) { p.Limits.CPUs = 0.001 }, "limits.cpus: 0.001 is too small"},
		{"profile path", func(p *Policy) { p.Syscalls.Profile = "seccomp.json" }, ""},
		{"strict profile", func(p *Policy) { p.Syscalls.Profile = "strict" }, ""},
		{"empty profile", func(p *Policy) { p.Syscalls.Profile = "" }, `syscalls.profile: "" is not one of`},
		{"gvisor", func(p *Policy) { p.Sandbox.Isolation, p.Sandbox.Runsc = IsolationGVisor, "/opt/runsc" }, ""},
		{"unknown isolation", func(p *Policy) { p.Sandbox.Isolation = "kvm" }, `sandbox.isolation: "kvm" is not one of native, gvisor`},
		{"relative runsc", func(p *Policy) { p.Sandbox.Runsc = "bin/runsc" }, `sandbox.runsc: "bin/runsc" is not an absolute path`},
		{"root gid", func(p *Policy) { p.User.GID = 0 }, "user.gid: 0 is root"},
		{"negative uid", func(p *Policy) { p.User.UID = -5 }, "user.uid: -5 is out of range (use 1-4294967294)"},
		{"uid -1", func(p *Policy) { p.User.HostUID = 1<<32 - 1 }, "user.host_uid: 4294967295 is out of range"},
		{"max uid", func(p *Policy) { p.User.HostUID = 1<<32 - 2 }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Default()
			tt.edit(p)
			err := p.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			lines := errorLines(t, err)
			if len(lines) != 1 || !strings.Contains(lines[0], tt.wantErr) {
				t.Errorf("Validate() = %q, want one error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestMarkFlag(t *testing.T) {
	p, err := Parse("pol.toml", []byte("[limits]\nmemory = \"1G\"\npids = -3\n\n[filesystem]\nread_write = [\"/ok\", \"rel\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Flags override the file's memory and read_write; pids stays the file's.
	p.Limits.Memory = 100
	p.MarkFlag("limits.memory", "--memory")
	p.Filesystem.ReadWrite = []string{"also-relative"}
	p.MarkFlag("filesystem.read_write", "--rw")
	p.Workspace.Mode = "snapshot"
	p.MarkFlag("workspace.mode", "--workspace-mode")
	checkErrors(t, p.Validate(), []string{
		`flag --workspace-mode: workspace.mode: "snapshot" is not one of direct, readonly, overlay`,
		`flag --rw: filesystem.read_write[0]: "also-relative" is relative`,
		`flag --memory: limits.memory: 100B is too small`,
		`pol.toml:3: limits.pids: -3 is negative`,
	})

	// Without a file, errors name just the field.
	d := Default()
	d.Limits.Pids = -1
	checkErrors(t, d.Validate(), []string{"limits.pids: -1 is negative"})
	if got := d.Validate().Error(); !strings.HasPrefix(got, "limits.pids: ") {
		t.Errorf("built-in policy error = %q, want it to start with the field", got)
	}
}

func TestDefaultValueNotBlamedOnFile(t *testing.T) {
	// The [user] header is in the file, but uid is not: an error about a
	// programmatically set uid must not point at the header's line.
	p, err := Parse("pol.toml", []byte("[user]\ngid = 1000\n"))
	if err != nil {
		t.Fatal(err)
	}
	p.User.UID = 0
	var fe *FieldError
	if err := p.Validate(); !errors.As(err, &fe) || fe.Line != 0 || fe.File != "pol.toml" || fe.Field != "user.uid" {
		t.Errorf("Validate() = %#v, want an error on user.uid without a line", fe)
	}
}

func TestFieldErrorFormat(t *testing.T) {
	tests := []struct {
		e    FieldError
		want string
	}{
		{FieldError{File: "p.toml", Line: 7, Field: "limits.memory", Msg: "bad"}, "p.toml:7: limits.memory: bad"},
		{FieldError{File: "p.toml", Field: "limits.memory", Msg: "bad"}, "p.toml: limits.memory: bad"},
		{FieldError{File: "p.toml", Line: 4, Msg: "syntax error: x"}, "p.toml:4: syntax error: x"},
		{FieldError{Flag: "--memory", Field: "limits.memory", Msg: "bad"}, "flag --memory: limits.memory: bad"},
		{FieldError{Field: "limits.memory", Msg: "bad"}, "limits.memory: bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	errs := Errors{&tests[0].e, &tests[3].e}
	if got, want := errs.Error(), "p.toml:7: limits.memory: bad\nflag --memory: limits.memory: bad"; got != want {
		t.Errorf("Errors.Error() = %q, want %q", got, want)
	}
}

func TestParentField(t *testing.T) {
	for in, want := range map[string]string{
		"a.b[2]":        "a.b",
		"a.b":           "a",
		"a":             "",
		`env.set."x.y"`: "env.set",
		`a."b\".c"`:     "a",
		"a[0].b":        "a[0]",
	} {
		if got := parentField(in); got != want {
			t.Errorf("parentField(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestErrorsBounded: a policy written to flood (thousands of bad entries,
// a giant value) gets an error of bounded size that still says how many
// problems there are, each shown located; a policy with a few problems
// gets every one, in full (the control).
func TestErrorsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("[network]\nmode = \"allow\"\nallow = [\"" + strings.Repeat("x", 200000) + " y\"")
	for i := range 5000 {
		fmt.Fprintf(&b, ", \"bad host %d\"", i)
	}
	b.WriteString("]\n")
	p, err := Parse("flood.toml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Validate()
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("got %v, want *Errors", err)
	}
	msg := err.Error()
	if len(msg) > 64<<10 {
		t.Errorf("the error is %d bytes: a policy can flood its reader", len(msg))
	}
	if !strings.Contains(msg, "flood.toml:3: network.allow[1]: \"bad host 0\"") || !strings.Contains(msg, "4901 more") {
		t.Errorf("the bounded error does not locate the first problems or count the rest: %.600s ... %s", msg, msg[max(0, len(msg)-300):])
	}

	p, err = Parse("few.toml", []byte("[network]\nmode = \"allow\"\nallow = [\"a b\", \"c d\", \"e f\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Validate()
	if !errors.As(err, &errs) || len(*errs) != 3 || strings.Contains(err.Error(), "more") {
		t.Errorf("three problems: %v", err)
	}
}

// TestByteOrderMarkIgnored: a policy an editor saved with a UTF-8 byte
// order mark reads as its author sees it, TOML or JSON, its lines
// unchanged; the control is the same document without the mark.
func TestByteOrderMarkIgnored(t *testing.T) {
	for _, doc := range []string{"[limits]\nmemory = \"1GiB\"\n", `{"limits": {"memory": "1GiB"}}`} {
		for _, bom := range []string{"", "\xef\xbb\xbf"} {
			p, err := ParseDocument("p", []byte(bom+doc))
			if err != nil || p.Limits.Memory != 1<<30 {
				t.Errorf("%q with mark %q: %v", doc, bom, err)
			}
		}
	}
	_, err := ParseDocument("p", []byte("\xef\xbb\xbf[limits]\nmemory = \"lots\"\n"))
	if err == nil || !strings.Contains(err.Error(), "p:2: limits.memory") {
		t.Errorf("an error after the mark: %v, want line 2", err)
	}
}

// TestUTF16Refused: a policy saved in UTF-16 or UTF-32 (with a byte-order
// mark, or without one) is refused as such, naming the encoding, by
// each parser; it read as a syntax error at a key 'ÿ' (found by a
// tester). The control is TestByteOrderMarkIgnored's UTF-8.
func TestUTF16Refused(t *testing.T) {
	toml := "[limits]\nmemory = \"1GiB\"\n"
	utf16 := func(s string, le, bom bool) string {
		var b []byte
		if bom {
			b = append(b, 0xfe, 0xff)
			if le {
				b[0], b[1] = 0xff, 0xfe
			}
		}
		for _, r := range s {
			if le {
				b = append(b, byte(r), 0)
			} else {
				b = append(b, 0, byte(r))
			}
		}
		return string(b)
	}
	for _, doc := range []string{utf16(toml, true, true), utf16(toml, false, true), utf16(toml, true, false), utf16(toml, false, false),
		"\xff\xfe\x00\x00[\x00\x00\x00"} {
		for name, parse := range map[string]func(string, []byte) (*Policy, error){"Parse": Parse, "ParseJSON": ParseJSON, "ParseDocument": ParseDocument} {
			if _, err := parse("p", []byte(doc)); err == nil || !strings.Contains(err.Error(), "p:1: the file is in UTF-") || !strings.Contains(err.Error(), "save it as UTF-8") {
				t.Errorf("%s(%q): %v, want the encoding named", name, doc[:6], err)
			}
		}
	}
}
