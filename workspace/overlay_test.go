//go:build linux

package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The workspace the agent of TestRealOverlay starts from.
var overlayLower = map[string]string{
	"keep.txt": "unchanged\n", "mod.txt": "one\ntwo\nthree\n", "del.txt": "delete me\n", "ren-src.txt": "renamed\n",
	"chmod.sh": "#!/bin/sh\necho hi\n", "dir/a.txt": "a\n", "dir/b.txt": "b\n", "rmdir-tree/x": "x\n",
	"rmdir-tree/sub/y": "y\n", "replace-dir/old1": "1\n", "replace-dir/old2": "2\n", "link": "-> keep.txt",
	"bin.dat": "\x00\x01\x02\x03", "noeol.txt": "a\nb", "file-to-link": "file\n", "dir-to-file/c": "c\n",
	"mvdir/f": "moved\n",
}

// What Changes must list after the agent's operations.
var overlayWant = []string{
	"modified file bin.dat binary", "mode file chmod.sh", "deleted file del.txt", "modified file dir/a.txt",
	"deleted file dir/b.txt", "type file dir-to-file", "added file empty.txt", "added dir emptydir",
	"type symlink file-to-link", "modified symlink link", "modified file mod.txt", "deleted dir mvdir count=1",
	"added dir mvdir2", "added file mvdir2/f", "added file new.bin binary", "added file new.sh", "added file new.txt",
	"added dir newdir", "added dir newdir/nested", "added file newdir/nested/n.txt", "added symlink newlink",
	"modified file noeol.txt", "added file ren-dst.txt", "deleted file ren-src.txt", "replaced dir replace-dir",
	"added file replace-dir/new", "deleted file replace-dir/old1", "deleted file replace-dir/old2",
	"deleted dir rmdir-tree count=2",
}

// agent is what the command in the sandbox does, in the merged directory.
func agent(m string) error {
	p := func(name string) string { return filepath.Join(m, name) }
	steps := []func() error{
		func() error { return os.WriteFile(p("mod.txt"), []byte("one\n2\nthree\nfour\n"), 0o644) },
		func() error { return os.Remove(p("del.txt")) },
		func() error { return os.Rename(p("ren-src.txt"), p("ren-dst.txt")) },
		func() error { return os.Chmod(p("chmod.sh"), 0o755) },
		func() error { return os.WriteFile(p("dir/a.txt"), []byte("A\n"), 0o644) },
		func() error { return os.Remove(p("dir/b.txt")) },
		func() error { return os.RemoveAll(p("rmdir-tree")) },
		func() error { return os.RemoveAll(p("replace-dir")) },
		func() error { return os.Mkdir(p("replace-dir"), 0o755) },
		func() error { return os.WriteFile(p("replace-dir/new"), []byte("new\n"), 0o644) },
		func() error { return os.Remove(p("link")) },
		func() error { return os.Symlink("mod.txt", p("link")) },
		func() error { return os.WriteFile(p("bin.dat"), []byte("\x00\x01\xff\x03\x04"), 0o644) },
		func() error { return os.WriteFile(p("noeol.txt"), []byte("a\nc"), 0o644) },
		func() error { return os.Remove(p("file-to-link")) },
		func() error { return os.Symlink("keep.txt", p("file-to-link")) },
		func() error { return os.RemoveAll(p("dir-to-file")) },
		func() error { return os.WriteFile(p("dir-to-file"), []byte("now a file\n"), 0o644) },
		func() error {
			// Renaming a lower directory gives EXDEV; tools fall back to copying.
			if err := os.Rename(p("mvdir"), p("mvdir2")); !errors.Is(err, syscall.EXDEV) {
				return fmt.Errorf("rename lower dir: %v, want EXDEV", err)
			}
			b, err := os.ReadFile(p("mvdir/f"))
			if err == nil {
				err = os.Mkdir(p("mvdir2"), 0o755)
			}
			if err == nil {
				err = os.WriteFile(p("mvdir2/f"), b, 0o644)
			}
			if err == nil {
				err = os.RemoveAll(p("mvdir"))
			}
			return err
		},
		func() error { return os.WriteFile(p("new.txt"), []byte("new file\n"), 0o644) },
		func() error { return os.MkdirAll(p("newdir/nested"), 0o755) },
		func() error { return os.WriteFile(p("newdir/nested/n.txt"), []byte("nested\n"), 0o644) },
		func() error { return os.Mkdir(p("emptydir"), 0o755) },
		func() error { return os.Symlink("keep.txt", p("newlink")) },
		func() error { return os.WriteFile(p("new.bin"), []byte("\x7fELF\x00\x00\x01"), 0o644) },
		func() error { return os.WriteFile(p("empty.txt"), nil, 0o644) },
		func() error { return os.WriteFile(p("new.sh"), []byte("#!/bin/sh\n"), 0o755) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	return nil
}

// overlayHelper runs in new user and mount namespaces: it mounts the
// overlay the way the backend does, runs agent in it and writes the
// merged view's manifest.
func overlayHelper() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	merged := os.Getenv("MOAT_WS_MERGED")
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,userxattr",
		os.Getenv("MOAT_WS_LOWER"), os.Getenv("MOAT_WS_UPPER"), os.Getenv("MOAT_WS_WORK"))
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay %s: %w", opts, err)
	}
	if err := agent(merged); err != nil {
		return err
	}
	m, err := manifestOf(merged, false)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(m)
	return os.WriteFile(os.Getenv("MOAT_WS_MANIFEST"), b, 0o644)
}

// runOverlay mounts c's layers over its workspace in a child process and
// returns the merged view it saw.
func runOverlay(t *testing.T, c *ChangeSet) map[string]string {
	t.Helper()
	dir := t.TempDir()
	merged, out := filepath.Join(dir, "merged"), filepath.Join(dir, "manifest.json")
	os.Mkdir(merged, 0o755)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MOAT_WS_HELPER=overlay", "MOAT_WS_LOWER="+c.Workspace(), "MOAT_WS_UPPER="+c.UpperDir(),
		"MOAT_WS_WORK="+c.WorkDir(), "MOAT_WS_MERGED="+merged, "MOAT_WS_MANIFEST="+out)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	output, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Skipf("cannot start a process in new user and mount namespaces: %v", err)
	}
	if err != nil {
		t.Fatalf("overlay helper: %v\n%s", err, output)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func gitViewOf(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		var typ string
		var mode uint32
		var rest string
		if n, _ := fmt.Sscanf(v, "%s %o %s", &typ, &mode, &rest); n == 3 && typ == "file" {
			v = fmt.Sprintf("file %o %s", mode&0o100, rest)
		}
		if typ != "dir" {
			out[k] = v
		}
	}
	return out
}

// TestRealOverlay is the whole life of a change set over a real overlay.
func TestRealOverlay(t *testing.T) {
	_, c := newSet(t, overlayLower)
	t.Cleanup(func() { c.Discard() })
	ws := c.Workspace()
	orig := filepath.Join(t.TempDir(), "orig")
	if out, err := exec.Command("cp", "-a", ws, orig).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	before := manifest(t, ws, false)
	merged := runOverlay(t, c)

	if d := diffManifests(before, manifest(t, ws, false)); d != "" {
		t.Fatalf("the overlay run changed the real workspace:\n%s", d)
	}
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if got := summarize(changes); !reflect.DeepEqual(got, overlayWant) {
		t.Errorf("changes:\n got %q\nwant %q", got, overlayWant)
	}

	checkPatch(t, c, orig, gitViewOf(merged))

	rep, err := c.Apply(nil, nil)
	if err != nil {
		t.Fatalf("apply: %v (conflicts %+v)", err, rep.Conflicts)
	}
	if d := diffManifests(merged, manifest(t, ws, false)); d != "" {
		t.Errorf("after apply the workspace differs from the merged view:\n%s", d)
	}
	if changes, err := c.Changes(); err != nil || len(changes) != 0 {
		t.Errorf("changes after apply: %q, %v", summarize(changes), err)
	}

	// The kernel left work/work with mode 0: Discard still removes all.
	if err := c.Discard(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("discard left %s: %v", c.Dir(), err)
	}
}
