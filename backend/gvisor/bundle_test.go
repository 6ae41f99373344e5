package gvisor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/seccomp"
)

// TestDefaultProfileTranslates: moat's default and strict profiles become
// runsc filters rule for rule, in order (runsc, as moat, lets the first
// matching rule decide), with ENOSYS answers as SCMP_ACT_TRACE.
func TestDefaultProfileTranslates(t *testing.T) {
	for name, p := range map[string]*seccomp.Profile{"default": seccomp.Default(), "strict": seccomp.Strict()} {
		s, err := ociSeccomp(p)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(s.Syscalls) != len(p.Rules) {
			t.Errorf("%s: %d rules, want %d", name, len(s.Syscalls), len(p.Rules))
		}
		for i, r := range p.Rules {
			if got := s.Syscalls[i]; strings.Join(got.Names, ",") != strings.Join(r.Names, ",") || len(got.Args) != len(r.Args) {
				t.Errorf("%s: rule %d is %v, want %v", name, i, got, r)
			}
			if r.Action == seccomp.Errno && r.Errno == 38 && s.Syscalls[i].Action != specs.ActTrace {
				t.Errorf("%s: ENOSYS rule for %v is %s, want SCMP_ACT_TRACE", name, r.Names, s.Syscalls[i].Action)
			}
		}
	}
}

// TestSeccompRefusesWhatRunscCannotSay: an errno runsc cannot return, two
// conditions on one argument (runsc would OR them) and ENOSYS without
// ptrace refused are errors, never a looser filter.
func TestSeccompRefusesWhatRunscCannotSay(t *testing.T) {
	for name, p := range map[string]*seccomp.Profile{
		"errno":   {DefaultAction: seccomp.Allow, Rules: []seccomp.Rule{{Names: []string{"mkdir"}, Action: seccomp.Errno, Errno: 13}}},
		"two-arg": {DefaultAction: seccomp.Allow, Rules: []seccomp.Rule{{Names: []string{"ioctl"}, Action: seccomp.Errno, Args: []seccomp.Arg{{Index: 1, Op: seccomp.GE, Value: 1}, {Index: 1, Op: seccomp.LE, Value: 5}}}}},
		"enosys":  {DefaultAction: seccomp.Allow, Rules: []seccomp.Rule{{Names: []string{"clone3"}, Action: seccomp.Errno, Errno: 38}}},
		"log":     {DefaultAction: seccomp.Log},
	} {
		if _, err := ociSeccomp(p); err == nil {
			t.Errorf("%s: translated, want an error", name)
		}
	}
}

// TestMounts: binds, files, masks and re-binds become OCI mounts at the
// Spec's targets, symlinks are made in the root, and a path no mount
// reaches is left alone.
func TestMounts(t *testing.T) {
	host := t.TempDir()
	os.MkdirAll(filepath.Join(host, "ws", "secret-dir"), 0o755)
	os.WriteFile(filepath.Join(host, "ws", "secret"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(host, "ws", ".git", "hooks"), 0o755)
	dir := t.TempDir()
	rootfs, files := filepath.Join(dir, "rootfs"), filepath.Join(dir, "files")
	os.Mkdir(rootfs, 0o755)
	os.Mkdir(files, 0o755)
	ms := []backend.Mount{
		{Kind: backend.MountTmpfs, Target: "/tmp", Options: "mode=1777"},
		{Kind: backend.MountSymlink, Source: "usr/bin", Target: "/bin"},
		{Kind: backend.MountBind, Source: filepath.Join(host, "ws"), Target: "/work"},
		{Kind: backend.MountBind, Source: "/nonexistent", Target: "/opt", Optional: true},
		{Kind: backend.MountProc, Target: "/proc"},
		{Kind: backend.MountDev, Target: "/dev"},
		{Kind: backend.MountFile, Target: "/etc/passwd", Data: "agent:x:1000:1000::/home/agent:/bin/sh\n"},
		{Kind: backend.MountReadOnly, Target: "/work/.git/hooks"},
		{Kind: backend.MountPin, Target: "/work/.git"},
		{Kind: backend.MountMask, Target: "/work/secret"},
		{Kind: backend.MountMask, Target: "/work/secret-dir"},
		{Kind: backend.MountMask, Target: "/etc/shadow", Optional: true},
		{Kind: backend.MountMask, Target: "/work/gone", Optional: true},
		{Kind: backend.MountReadOnly, Target: "/tmp/x", Optional: true},
	}
	got, err := ociMounts(ms, rootfs, files, stubPin, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range got {
		lines = append(lines, m.Destination+" "+m.Type+" "+strings.Join(m.Options, ","))
	}
	want := []string{
		"/tmp tmpfs nosuid,nodev,mode=1777",
		"/work bind rbind,nosuid,nodev",
		"/proc proc nosuid,nodev,noexec",
		"/etc/passwd bind rbind,nosuid,nodev,ro",
		"/work/.git/hooks bind rbind,nosuid,nodev,ro",
		"/work/.git bind rbind,nosuid,nodev",
		"/work/secret bind rbind,nosuid,nodev,ro",
		"/work/secret-dir tmpfs ro,nosuid,nodev,noexec,mode=0555",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("mounts:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if l, err := os.Readlink(filepath.Join(rootfs, "bin")); err != nil || l != "usr/bin" {
		t.Errorf("rootfs/bin -> %q, %v; want usr/bin", l, err)
	}
	// A protected path and a pin are bound from what pin staged for
	// their host paths (a path under a pin is the host's, not the
	// staged one's).
	if got[4].Source != "/staged"+filepath.Join(host, "ws", ".git", "hooks") || got[5].Source != "/staged"+filepath.Join(host, "ws", ".git") {
		t.Errorf("re-bind sources %s, %s, want the staged host paths under the workspace", got[4].Source, got[5].Source)
	}
	if b, err := os.ReadFile(got[3].Source); err != nil || !strings.HasPrefix(string(b), "agent:") {
		t.Errorf("passwd file: %q, %v", b, err)
	}
	if _, err := ociMounts([]backend.Mount{{Kind: backend.MountOverlay, Target: "/w"}}, rootfs, files, stubPin, nil); err == nil {
		t.Error("an overlay mount translated, want an error")
	}
	if _, err := ociMounts([]backend.Mount{{Kind: backend.MountReadOnly, Target: "/nowhere"}}, rootfs, files, stubPin, nil); err == nil {
		t.Error("a protected path outside every mount passed, want an error")
	}

	// A mask or a read-only path that must exist, gone from the host
	// since the Spec was made: refused, naming it, where the same mounts
	// of a path that is there translate (above).
	work := backend.Mount{Kind: backend.MountBind, Source: filepath.Join(host, "ws"), Target: "/work"}
	for _, m := range []backend.Mount{
		{Kind: backend.MountMask, Target: "/work/gone"},
		{Kind: backend.MountBind, Source: filepath.Join(host, "ws", "gone"), Target: "/work/gone", ReadOnly: true},
		{Kind: backend.MountReadOnly, Target: "/work/gone"},
	} {
		_, err := ociMounts([]backend.Mount{work, m}, rootfs, files, stubPin, nil)
		var gone *backend.GoneError
		if !errors.As(err, &gone) || gone.Path != "/work/gone" || !strings.Contains(err.Error(), "/work/gone disappeared") {
			t.Errorf("%s of a missing path that must exist: %v, want a GoneError naming it", m.Kind, err)
		}
	}
}

// stubPin stages src by name, as container.pin does for a file that is
// there.
func stubPin(src string) (string, error) {
	if _, err := os.Lstat(src); err != nil {
		return "", err
	}
	return "/staged" + src, nil
}

// TestScriptPinsRunscVersion: scripts/runsc.sh builds the version whose
// cache directory Find looks in.
func TestScriptPinsRunscVersion(t *testing.T) {
	b, err := os.ReadFile("../../scripts/runsc.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "MOAT_RUNSC_VERSION:-"+RunscVersion+"}") {
		t.Errorf("scripts/runsc.sh does not build %s", RunscVersion)
	}
}

// TestFindRefusesWhatOthersCanWrite: a named runsc must be an executable
// file that only root and this user can change, in directories only
// they can change; a typo is an error, not a fall back.
func TestFindRefusesWhatOthersCanWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "runsc")
	os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
	os.Chmod(p, 0o775)
	if _, err := Find(p); err == nil {
		t.Error("a group-writable runsc was accepted")
	}
	os.Chmod(p, 0o755)
	if got, err := Find(p); err != nil || got != p {
		t.Errorf("positive control: Find(%s) = %q, %v", p, got, err)
	}
	if _, err := Find(filepath.Join(dir, "typo")); err == nil {
		t.Error("a missing named runsc was accepted")
	}
	// A directory on the way that others may write: they could replace
	// the file.
	os.Chmod(dir, 0o777)
	if _, err := Find(p); err == nil {
		t.Error("a runsc in a directory others can write was accepted")
	}
	os.Chmod(dir, 0o755)
	// Owned by another user (a daemon's tenant naming their own binary
	// in [sandbox] runsc): only root can give a file away to test it.
	if os.Geteuid() != 0 {
		t.Log("not root: the case of a runsc another user owns needs chown")
		return
	}
	os.Chown(p, 1000, 1000)
	if _, err := Find(p); err == nil {
		t.Error("a runsc owned by another user was accepted")
	}
	os.Chown(p, 0, 0)
	if got, err := Find(p); err != nil || got != p {
		t.Errorf("positive control: Find(%s) = %q, %v", p, got, err)
	}
}
