package policy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	tmp := t.TempDir()
	cwd := filepath.Join(tmp, "cwd")
	home := filepath.Join(tmp, "home", "me")
	policyDir := filepath.Join(tmp, "proj")
	if err := os.MkdirAll(policyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	const doc = `
[workspace]
path = "src/../app"
[filesystem]
read_only = ["/usr/", "~/.local/bin", "~"]
read_write = ["~/.cache//pip"]
[syscalls]
profile = "profiles/seccomp.json"
`
	file := filepath.Join(policyDir, "moat.toml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name          string
		load          func(t *testing.T) *Policy
		wantWorkspace string
		wantProfile   string
	}{{
		name:          "built-in: relative to cwd",
		load:          func(*testing.T) *Policy { return Default() },
		wantWorkspace: cwd,
		wantProfile:   "default",
	}, {
		name:          "absolute file: relative to its directory",
		load:          func(t *testing.T) *Policy { return mustLoad(t, file) },
		wantWorkspace: filepath.Join(policyDir, "app"),
		wantProfile:   filepath.Join(policyDir, "profiles/seccomp.json"),
	}, {
		name: "relative file: relative to its directory under cwd",
		load: func(t *testing.T) *Policy {
			p, err := Parse("sub/moat.toml", []byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		wantWorkspace: filepath.Join(cwd, "sub/app"),
		wantProfile:   filepath.Join(cwd, "sub/profiles/seccomp.json"),
	}, {
		name: "flags: relative to cwd",
		load: func(t *testing.T) *Policy {
			p := mustLoad(t, file)
			p.Workspace.Path = "other"
			p.MarkFlag("workspace.path", "--workspace")
			p.Syscalls.Profile = "my.json"
			p.MarkFlag("syscalls.profile", "--seccomp")
			return p
		},
		wantWorkspace: filepath.Join(cwd, "other"),
		wantProfile:   filepath.Join(cwd, "my.json"),
	}, {
		name: "home workspace",
		load: func(*testing.T) *Policy {
			p := Default()
			p.Workspace.Path = "~/work/"
			return p
		},
		wantWorkspace: filepath.Join(home, "work"),
		wantProfile:   "default",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.load(t)
			if err := p.Resolve(cwd, home); err != nil {
				t.Fatal(err)
			}
			if p.Workspace.Path != tt.wantWorkspace {
				t.Errorf("workspace.path = %q, want %q", p.Workspace.Path, tt.wantWorkspace)
			}
			if p.Syscalls.Profile != tt.wantProfile {
				t.Errorf("syscalls.profile = %q, want %q", p.Syscalls.Profile, tt.wantProfile)
			}
			before := exported(p)
			if err := p.Resolve("/elsewhere", "/nohome"); err != nil || !reflect.DeepEqual(exported(p), before) {
				t.Errorf("second Resolve changed the policy or failed: %v", err)
			}
		})
	}

	p := mustLoad(t, file)
	if err := p.Resolve(cwd, home); err != nil {
		t.Fatal(err)
	}
	wantRO := []string{"/usr", filepath.Join(home, ".local/bin"), home}
	if !reflect.DeepEqual(p.Filesystem.ReadOnly, wantRO) {
		t.Errorf("read_only = %q, want %q", p.Filesystem.ReadOnly, wantRO)
	}
	if want := []string{filepath.Join(home, ".cache/pip")}; !reflect.DeepEqual(p.Filesystem.ReadWrite, want) {
		t.Errorf("read_write = %q, want %q", p.Filesystem.ReadWrite, want)
	}
}

func TestResolveErrors(t *testing.T) {
	p := Default()
	p.Filesystem.ReadWrite = []string{"~/.cache", "rel"}
	p.MarkFlag("filesystem.read_write", "--rw")
	checkErrors(t, p.Resolve("/cwd", ""), []string{
		`flag --rw: filesystem.read_write[0]: "~/.cache" needs the home directory, which is unknown`,
		`flag --rw: filesystem.read_write[1]: "rel" is relative`,
	})
	checkErrors(t, Default().Resolve("relative", "/home/me"), []string{`working directory "relative" is not absolute`})
}

func mustLoad(t *testing.T, path string) *Policy {
	t.Helper()
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResolveUnwrittenWorkspaceIsCwd: a policy file that does not set
// workspace.path leaves the workspace where moat runs, not in the file's
// own directory (a shared policy must not make its directory writable).
func TestResolveUnwrittenWorkspaceIsCwd(t *testing.T) {
	p, err := Parse("/etc/moat/agent.toml", []byte("[limits]\nwall = \"1m\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Resolve("/src/project", "/home/u"); err != nil {
		t.Fatal(err)
	}
	if p.Workspace.Path != "/src/project" {
		t.Errorf("workspace %q, want the working directory", p.Workspace.Path)
	}
	p, err = Parse("/etc/moat/agent.toml", []byte("[workspace]\npath = \"ws\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	p.Resolve("/src/project", "/home/u")
	if p.Workspace.Path != "/etc/moat/ws" {
		t.Errorf("workspace %q, want it relative to the file that set it", p.Workspace.Path)
	}
}

// A relative path, which Resolve refuses, does not hide the problems
// Validate finds; the path itself is reported once.
func TestResolveAndValidateReportsAll(t *testing.T) {
	doc := "[limits]\ncpus = -2\n[filesystem]\nread_only = [\"etc\"]\n[user]\nuid = 0\n"
	p, err := Parse("p.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	err = p.ResolveAndValidate("/work", "/home/me")
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"p.toml:2: limits.cpus", "p.toml:4: filesystem.read_only[0]", "p.toml:6: user.uid"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if n := strings.Count(msg, "filesystem.read_only[0]"); n != 1 {
		t.Errorf("the relative path is reported %d times: %q", n, msg)
	}
	if err := Default().ResolveAndValidate("/work", "/home/me"); err != nil {
		t.Errorf("default policy: %v", err)
	}
}
