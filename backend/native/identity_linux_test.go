//go:build linux

package native_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

// TestNestedIdentity: as root, a direct start id-maps the workspace with
// init's own user namespace, which maps the workspace's owner to the
// sandbox user's host ids, and starts the command in a namespace nested in
// it that maps the sandbox user to that owner (see nestable). Whichever
// way the trees are mapped (that, holders as on a host whose AppArmor
// restricts user namespaces, or the init stage's holders), the command is
// the sandbox user inside (its host ids, the dedicated unprivileged ones,
// are read from outside by sandbox's TestIdentityIsUnprivileged), what it
// writes lands owned by the workspace's owner, and it cannot widen its own
// maps or groups.
func TestNestedIdentity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root id-maps the workspace (an ordinary caller's files are its own)")
	}
	const owner, group = 4321, 4322
	probe := `cat /proc/self/uid_map /proc/self/gid_map
grep -E '^(Uid|Gid|Groups):' /proc/self/status
echo x > new && stat -c '%u:%g' new
stat -c '%u:%g' "$HOME"
echo 0 0 1 > /proc/self/uid_map 2>/dev/null && echo "uid_map written"
echo allow > /proc/self/setgroups 2>/dev/null && echo "setgroups allowed"
echo done`
	cases := []struct {
		name    string
		b       *native.Backend
		holders bool
	}{
		{"direct", &native.Backend{}, false},
		{"forked direct", &native.Backend{ForkStart: true}, false},
		{"direct, holders", &native.Backend{}, true},
		{"init stage", &native.Backend{InitStage: true}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.holders && !c.b.InitStage {
				t.Cleanup(native.ForceHoldersForTesting())
			}
			for _, ws := range []struct{ uid, gid int }{{0, 0}, {owner, group}, {1000, 1000}} {
				dir := t.TempDir()
				if err := os.Chown(dir, ws.uid, ws.gid); err != nil {
					t.Fatal(err)
				}
				s := spec(t, dir, "/bin/sh", "-c", probe)
				var out, errb bytes.Buffer
				st, err := c.b.Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb})
				if err != nil || st.ExitCode != 0 {
					t.Fatalf("owner %d: exit %v, %v: %s", ws.uid, st, err, errb.String())
				}
				lines := strings.Split(strings.TrimSpace(out.String()), "\n")
				if len(lines) < 7 || lines[len(lines)-1] != "done" {
					t.Fatalf("owner %d: output %q", ws.uid, out.String())
				}
				// Inside: the sandbox user, mapped to one id of the
				// namespace above, which is the owner with the nested
				// identity and the host id with holders.
				// (A workspace of the sandbox user's own ids needs no
				// nesting: init's namespace maps them as the command
				// needs.)
				parent := []int{ws.uid, ws.gid}
				if c.holders || native.UsernsRestricted() || ws.uid == s.User.UID && ws.gid == s.User.GID {
					parent = []int{s.User.HostUID, s.User.HostGID}
				}
				for i, want := range []string{
					fmt.Sprintf("%d %d 1", s.User.UID, parent[0]),
					fmt.Sprintf("%d %d 1", s.User.GID, parent[1]),
				} {
					if got := strings.Join(strings.Fields(lines[i]), " "); got != want {
						t.Errorf("owner %d: map %q, want %q", ws.uid, got, want)
					}
				}
				// The kernel's ids: the sandbox user's, as seen inside,
				// and no supplementary group.
				for i, want := range []string{
					fmt.Sprintf("Uid: %[1]d %[1]d %[1]d %[1]d", s.User.UID),
					fmt.Sprintf("Gid: %[1]d %[1]d %[1]d %[1]d", s.User.GID),
				} {
					if got := strings.Join(strings.Fields(lines[2+i]), " "); got != want {
						t.Errorf("owner %d: %q, want %q", ws.uid, got, want)
					}
				}
				if got := strings.Join(strings.Fields(lines[4]), " "); got != "Groups:" {
					t.Errorf("owner %d: supplementary groups inside: %q", ws.uid, got)
				}
				if want := fmt.Sprintf("%d:%d", s.User.UID, s.User.GID); lines[5] != want || lines[6] != want {
					t.Errorf("owner %d: the new file and $HOME are %s and %s inside, want %s", ws.uid, lines[5], lines[6], want)
				}
				for _, l := range lines[7:] {
					if l != "done" {
						t.Errorf("owner %d: the command could %s", ws.uid, l)
					}
				}
				// On the host: the workspace's owner.
				fi, err := os.Stat(filepath.Join(dir, "new"))
				if err != nil {
					t.Fatalf("owner %d: %v", ws.uid, err)
				}
				if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != ws.uid || int(st.Gid) != ws.gid {
					t.Errorf("owner %d: the new file is %d:%d on the host, want %d:%d", ws.uid, st.Uid, st.Gid, ws.uid, ws.gid)
				}
			}
		})
	}
}

// TestRootsGroupsStayOutside: moat run by root in a shell whose
// supplementary groups include root's own group (0) and another: the
// command, an unprivileged host user, must not keep them. It tries to read
// files that only those groups may read, through a plain (not id-mapped)
// bind, and must be refused.
func TestRootsGroupsStayOutside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("an ordinary caller's groups stay with the command (the kernel denies it dropping them); root's must not")
	}
	const grp = 4242
	old, err := syscall.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setgroups([]int{0, grp}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setgroups(old) })
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	// "world" is readable by anyone: the positive control, showing that
	// the probe and the mount work and only the group bits stop the reads.
	if err := os.WriteFile(filepath.Join(dir, "world"), []byte("public\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	for name, gid := range map[string]int{"g0": 0, "g4242": grp} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte("secret\n"), 0o040); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f, 0, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, 0o040); err != nil {
			t.Fatal(err)
		}
	}
	probe := `grep '^Groups:' /proc/self/status
cat /opt/moat-grp/g0 2>/dev/null && echo "read g0"
cat /opt/moat-grp/g4242 2>/dev/null && echo "read g4242"
cat /opt/moat-grp/world >/dev/null && echo "read world"
echo done`
	for _, b := range []*native.Backend{{}, {ForkStart: true}, {InitStage: true}} {
		ws := t.TempDir()
		s := spec(t, ws, "/bin/sh", "-c", probe)
		s.Mounts = append(s.Mounts, backend.Mount{Kind: backend.MountBind, Source: dir, Target: "/opt/moat-grp", ReadOnly: true})
		var out, errb bytes.Buffer
		st, err := b.Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb})
		if err != nil || st.ExitCode != 0 {
			t.Fatalf("%+v: exit %v, %v: %s", *b, st, err, errb.String())
		}
		if got, want := strings.Join(strings.Fields(out.String()), " "), "Groups: read world done"; got != want {
			t.Errorf("%+v: %q, want %q (no supplementary group, only the world-readable file read)", *b, got, want)
		}
	}
}
