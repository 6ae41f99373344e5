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
		Wall: "90", Memory: "512M", Pids: "10", CPUs: "1.5", User: "1234:1235", ReadOnly: true,
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
