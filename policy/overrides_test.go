package policy_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestOverridesApply: each option changes its field, values are read
// with the policy file's parsers, and lists are appended to.
func TestOverridesApply(t *testing.T) {
	p := policy.Default()
	o := policy.Overrides{
		Dir: "/work", Workspace: "ws", Net: "allow:example.com, *.go.dev", TCPBind: "0,8080", TCPConnect: "none",
		ReadOnlyPaths: []string{"data"}, DenyPaths: []string{"/srv/secret"}, Env: []string{"A=B", "LC_X"},
		// Spaces around a number are ignored by every flag (--pids and
		// --cpus refused them, found by a tester).
		Wall: " 90", Memory: "512M ", Pids: " 10", CPUs: "1.5 ", User: "1234:1235", ReadOnly: true,
	}
	if err := o.Apply(p); err != nil {
		t.Fatal(err)
	}
	if p.Workspace.Path != "/work/ws" || p.Workspace.Mode != policy.WorkspaceReadOnly {
		t.Errorf("workspace %+v", p.Workspace)
	}
	if p.Network.Mode != "allow" || strings.Join(p.Network.Allow, " ") != "example.com *.go.dev" {
		t.Errorf("network %+v", p.Network)
	}
	if p.Network.TCPBind == nil || len(*p.Network.TCPBind) != 2 || p.Network.TCPConnect == nil || len(*p.Network.TCPConnect) != 0 {
		t.Errorf("tcp %v %v", p.Network.TCPBind, p.Network.TCPConnect)
	}
	if ro := p.Filesystem.ReadOnly; ro[len(ro)-1] != "/work/data" || len(ro) != len(policy.Default().Filesystem.ReadOnly)+1 {
		t.Errorf("read_only %v", ro)
	}
	if d := p.Filesystem.Deny; d[len(d)-1] != "/srv/secret" || len(d) != 3 {
		t.Errorf("deny %v: the policy's own entries must stay", d)
	}
	if p.Env.Set["A"] != "B" || p.Env.Set["HOME"] == "" || p.Env.Pass[len(p.Env.Pass)-1] != "LC_X" {
		t.Errorf("env %+v", p.Env)
	}
	if p.Limits.Wall.String() != "1m30s" || p.Limits.Memory != 512*policy.MiB || p.Limits.Pids != 10 || p.Limits.CPUs != 1.5 {
		t.Errorf("limits %+v", p.Limits)
	}
	if p.User.UID != 1234 || p.User.GID != 1235 {
		t.Errorf("user %+v", p.User)
	}
}

// TestOverridesErrors: a bad value is an error naming the option, and
// Validate's errors about an overridden field name the option too.
func TestOverridesErrors(t *testing.T) {
	for _, c := range []struct {
		o    policy.Overrides
		want string
	}{
		{policy.Overrides{Memory: "lots"}, `flag --memory: invalid size "lots"`},
		{policy.Overrides{Wall: "soon", Pids: "x"}, "flag --wall: invalid duration \"soon\": want Go syntax such as \"90s\", \"1m30s\" or \"2h\", or a number of seconds\nflag --pids: invalid value \"x\": invalid syntax (want a whole number)"},
		{policy.Overrides{Net: "host:example.com"}, "flag --net \"host:example.com\": only allow takes a list"},
		{policy.Overrides{TCPBind: "http"}, `flag --tcp-bind "http": "http" is not a port number`},
		{policy.Overrides{User: "root"}, "flag --user \"root\": moat takes numeric ids"},
		{policy.Overrides{ReadOnly: true, WorkspaceMode: "overlay"}, "--read-only means --workspace-mode readonly"},
		{policy.Overrides{ReadWritePaths: []string{"cache"}}, `flag --rw "cache": a relative path needs a base directory`},
		{policy.Overrides{Env: []string{"=x"}}, `flag --env: "=x": want NAME`},
		{policy.Overrides{Env: []string{"HOME", ""}}, `flag --env: "": want NAME`},
	} {
		err := c.o.Apply(policy.Default())
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	p := policy.Default()
	o := policy.Overrides{Dir: "/", UID: "0", Memory: "1K"}
	if err := o.Apply(p); err != nil {
		t.Fatal(err)
	}
	err := p.Validate()
	var fe *policy.FieldError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "flag --uid: user.uid:") || !strings.Contains(err.Error(), "flag --memory: limits.memory:") {
		t.Errorf("validate: %v, want errors naming --uid and --memory", err)
	}
	// Positive control: the same run without the overrides validates.
	if err := policy.Default().Validate(); err != nil {
		t.Errorf("default policy: %v", err)
	}
}

// TestOverridesRoundToZero: a size or a number of CPUs written non-zero
// that reads as 0 is refused, since 0 means no limit; 0 itself and small
// values are the controls.
func TestOverridesRoundToZero(t *testing.T) {
	for _, c := range []struct {
		o    policy.Overrides
		want string
	}{
		{policy.Overrides{Output: "0.0001K"}, `flag --output: invalid value "0.0001K": invalid size "0.0001K": rounds down to 0 bytes, which means no limit`},
		{policy.Overrides{FileSize: "0.0004k"}, `flag --file-size: invalid value "0.0004k": invalid size "0.0004k": rounds down to 0 bytes`},
		{policy.Overrides{Memory: "0.0000000001G"}, `flag --memory: invalid value "0.0000000001G": invalid size "0.0000000001G": rounds down to 0 bytes`},
		{policy.Overrides{Disk: "0.0000000001G"}, `flag --disk: invalid value "0.0000000001G": invalid size "0.0000000001G": rounds down to 0 bytes`},
		{policy.Overrides{CPUs: "1e-400"}, `flag --cpus: invalid value "1e-400": rounds to zero, which means no limit; write 0 for no limit`},
		{policy.Overrides{CPUs: "0x1p-2000"}, `flag --cpus: invalid value "0x1p-2000": rounds to zero`},
		{policy.Overrides{CPUs: "-1E-400"}, `flag --cpus: invalid value "-1E-400": rounds to zero`},
	} {
		err := c.o.Apply(policy.Default())
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	for _, c := range []struct {
		o    policy.Overrides
		want policy.Limits
	}{
		{policy.Overrides{Output: "0", FileSize: "0.0K", CPUs: "0", Memory: "0"}, policy.Limits{}},
		{policy.Overrides{Output: "0.001K", FileSize: "1K", CPUs: "0.5", Memory: "1M"}, policy.Limits{Output: 1, FileSize: policy.KiB, CPUs: 0.5, Memory: policy.MiB}},
		{policy.Overrides{Output: "1", FileSize: "1.5G", CPUs: "0x1p-1", Memory: "0.001G"}, policy.Limits{Output: 1, FileSize: policy.GiB + policy.GiB/2, CPUs: 0.5, Memory: 1073741}},
		{policy.Overrides{CPUs: "0e-400", Output: "0", FileSize: "0"}, policy.Limits{}},
	} {
		p := policy.Default()
		if err := c.o.Apply(p); err != nil {
			t.Errorf("%+v: %v", c.o, err)
			continue
		}
		if l := p.Limits; l.Output != c.want.Output || l.FileSize != c.want.FileSize || l.CPUs != c.want.CPUs || l.Memory != c.want.Memory {
			t.Errorf("%+v: limits %+v, want %+v", c.o, l, c.want)
		}
	}
}

// TestOverridesEmptyValue: an option given with an empty value (Given)
// is refused as a bad value of it is, saying what it allows, not taken
// as "not given"; without Given, "" still means not given.
func TestOverridesEmptyValue(t *testing.T) {
	for name, want := range map[string]string{
		"tcp-bind":       `flag --tcp-bind "": "" is not a port number; write ports separated by commas (22,8080) or none`,
		"tcp-connect":    `flag --tcp-connect "": "" is not a port number`,
		"seccomp":        `flag --seccomp: syscalls.profile: "" is not one of default, strict, unconfined`,
		"landlock":       `flag --landlock: filesystem.landlock: "" is not one of auto, required, best-effort, off`,
		"workspace-mode": `flag --workspace-mode: workspace.mode: "" is not one of direct, readonly, overlay, copy`,
		"isolation":      `flag --isolation: sandbox.isolation: "" is not one of native, gvisor`,
		"net":            `flag --net: network.mode: "" is not one of none, allow, host`,
		"workspace":      `flag --workspace: empty path`,
		"user":           `flag --user "": moat takes numeric ids`,
		"memory":         `flag --memory: invalid size "": want a number`,
		"wall":           `flag --wall: invalid duration "": want Go syntax`,
		"cpus":           `flag --cpus: invalid value "": invalid syntax (want a number of CPUs`,
		"pids":           `flag --pids: invalid value "": invalid syntax (want a whole number)`,
		"output":         `flag --output: invalid size "": want a number`,
		"uid":            `flag --uid: invalid value "": invalid syntax (want a whole number)`,
	} {
		o := policy.Overrides{Dir: "/work", Given: map[string]bool{name: true}}
		p := policy.Default()
		err := o.Apply(p)
		if err == nil {
			err = p.Resolve("/work", "/home/u")
		}
		if err == nil {
			err = p.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--%s '': %v, want %q", name, err, want)
		}
		// Control: the same option not given changes nothing.
		p = policy.Default()
		o.Given = nil
		if err := o.Apply(p); err != nil {
			t.Errorf("--%s not given: %v", name, err)
		} else if err := p.Validate(); err != nil {
			t.Errorf("--%s not given: %v", name, err)
		}
	}
	for _, o := range []policy.Overrides{
		{Dir: "/work", ReadOnlyPaths: []string{""}},
		{Dir: "/work", ReadWritePaths: []string{"/data", ""}},
		{Dir: "/work", DenyPaths: []string{""}},
	} {
		if err := o.Apply(policy.Default()); err == nil || !strings.Contains(err.Error(), "empty path") {
			t.Errorf("%+v: %v, want an empty path refused (not the working directory)", o, err)
		}
	}
	o := policy.Overrides{ReadOnly: true, Given: map[string]bool{"workspace-mode": true}}
	if err := o.Apply(policy.Default()); err == nil || !strings.Contains(err.Error(), `--workspace-mode is ""`) {
		t.Errorf("--read-only --workspace-mode '': %v", err)
	}
	o = policy.Overrides{Dir: "/work/ws", Given: map[string]bool{"workdir": true}}
	p := policy.Default()
	p.Workspace.Path = "/work/ws"
	if _, err := o.WorkDir(p); err == nil || !strings.Contains(err.Error(), "flag -w: empty value") {
		t.Errorf("-w '': %v", err)
	}
	// Control: a non-empty value of a Given option applies as before.
	o = policy.Overrides{Landlock: "off", TCPBind: "none", Given: map[string]bool{"landlock": true, "tcp-bind": true}}
	p = policy.Default()
	if err := o.Apply(p); err != nil || p.Filesystem.Landlock != "off" || p.Network.TCPBind == nil {
		t.Errorf("given values: %v %+v", err, p.Filesystem)
	}
}

// TestOverridesWorkDir: -w must lie inside the workspace.
func TestOverridesWorkDir(t *testing.T) {
	p := policy.Default()
	p.Workspace.Path = "/work/ws"
	for dir, want := range map[string]string{"": "", "sub": "/work/ws/sub", "/work/ws": "/work/ws", "/work/ws/../x": "outside the workspace", "..": "outside the workspace"} {
		o := policy.Overrides{Dir: "/work/ws", Workdir: dir}
		got, err := o.WorkDir(p)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) || want == "" && got != "" {
			t.Errorf("-w %q: %q, want %q", dir, got, want)
		}
	}
}

// TestOverridesJSON: a request names each option as the flag does,
// without its dashes, and cannot choose the base of relative paths.
func TestOverridesJSON(t *testing.T) {
	var o policy.Overrides
	if err := json.Unmarshal([]byte(`{"memory":"1G","tcp-bind":"80","read-only":true,"ro":["/data"],"Dir":"/","dir":"/"}`), &o); err != nil {
		t.Fatal(err)
	}
	if o.Memory != "1G" || o.TCPBind != "80" || !o.ReadOnly || len(o.ReadOnlyPaths) != 1 || o.Dir != "" {
		t.Errorf("%+v", o)
	}
}

func TestClosestOption(t *testing.T) {
	known := []string{"e", "memory", "net", "network", "workspace"}
	for name, want := range map[string]string{"memroy": "memory", "netwrok": "network", "workspce": "workspace", "zzzzzz": "", "f": ""} {
		if got := policy.ClosestOption(name, known); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestPathInBothLists: a path in filesystem.read_only and read_write was
// writable without a word, the mounts' order deciding; it is refused on
// the read_write entry's line, naming the other's. A --ro or --rw flag
// decides for the path it names, taking it out of the other list. The
// control: a writable path under a read-only one is no conflict.
func TestPathInBothLists(t *testing.T) {
	src := "[filesystem]\nread_only = [\"/usr\", \"/data/\"]\nread_write = [\"/data/out\", \"/data\"]\n"
	p, err := policy.Parse("pol.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Validate()
	if err == nil || !strings.Contains(err.Error(), `pol.toml:3: filesystem.read_write[1]: "/data" is also in filesystem.read_only (line 2)`) {
		t.Fatalf("a path in both lists: %v", err)
	}
	if strings.Contains(err.Error(), "read_write[0]") {
		t.Errorf("control: a writable path under a read-only one is refused: %v", err)
	}
	for _, tc := range []struct {
		o      policy.Overrides
		ro, rw string
	}{
		{policy.Overrides{Dir: "/", ReadWritePaths: []string{"/data"}}, "/usr", "/data/out /data /data"},
		{policy.Overrides{Dir: "/", ReadOnlyPaths: []string{"/data"}}, "/usr /data/ /data", "/data/out"},
		{policy.Overrides{Dir: "/", ReadWritePaths: []string{"/etc"}}, "/usr /bin /sbin /lib /lib64", "/etc"},
	} {
		q := policy.Default()
		if tc.o.ReadWritePaths == nil || tc.o.ReadWritePaths[0] != "/etc" {
			q, _ = policy.Parse("pol.toml", []byte(src))
		}
		if err := tc.o.Apply(q); err != nil {
			t.Fatal(err)
		}
		if err := q.Validate(); err != nil {
			t.Errorf("%+v: %v", tc.o, err)
		}
		if ro, rw := strings.Join(q.Filesystem.ReadOnly, " "), strings.Join(q.Filesystem.ReadWrite, " "); ro != tc.ro || rw != tc.rw {
			t.Errorf("%+v: read_only %q read_write %q, want %q and %q", tc.o, ro, rw, tc.ro, tc.rw)
		}
	}
}

// TestPathUnderDeny: a path a list shows (read_only, read_write, or a
// --ro or --rw flag) at or below a denied one was hidden without a word,
// the deny winning; it is refused, naming the deny's file and line. The
// control: a denied path inside a writable tree is what deny is for.
func TestPathUnderDeny(t *testing.T) {
	src := "[filesystem]\ndeny = [\"/data/keys\"]\nread_write = [\"/data\"]\n"
	p, err := policy.Parse("pol.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("control: a denied path inside a writable one: %v", err)
	}
	for _, tc := range []struct {
		o    policy.Overrides
		want string
	}{
		{policy.Overrides{Dir: "/", ReadWritePaths: []string{"/data/keys"}}, `flag --rw: filesystem.read_write[1]: "/data/keys" is hidden by filesystem.deny "/data/keys" (pol.toml:2)`},
		{policy.Overrides{Dir: "/", ReadOnlyPaths: []string{"/data/keys/a/"}}, `flag --ro: filesystem.read_only[6]: "/data/keys/a/" is hidden by filesystem.deny "/data/keys" (pol.toml:2)`},
	} {
		q, _ := policy.Parse("pol.toml", []byte(src))
		if err := tc.o.Apply(q); err != nil {
			t.Fatal(err)
		}
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	q := policy.Default()
	if err := (&policy.Overrides{Dir: "/", ReadWritePaths: []string{"/etc/shadow"}}).Apply(q); err != nil {
		t.Fatal(err)
	}
	if err := q.Validate(); err == nil || !strings.Contains(err.Error(), `"/etc/shadow" is hidden by filesystem.deny "/etc/shadow", which wins`) {
		t.Errorf("--rw /etc/shadow: %v", err)
	}
}
