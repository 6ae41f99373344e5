//go:build linux

package native

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestIdmapUserns checks both ways of getting a user namespace for an
// idmapped mount (a holder stopped at exec by PTRACE_TRACEME, and the
// fallback that runs this binary as a holder): a file owned by uid:gid
// 1000:1000 must appear owned by the mapped host ids through the mount.
func TestIdmapUserns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmapped mounts need root on the host (the rootless path does not use them)")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(file, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	const host = 2000000000
	for _, stopped := range []bool{true, false} {
		ns, err := holdUserns(1000, 1000, host, host+1, stopped)
		if err != nil {
			t.Fatalf("stopped=%v: %v", stopped, err)
		}
		tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
		err = unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr)
		ns.Close()
		if err != nil {
			unix.Close(tree)
			t.Fatalf("stopped=%v: mount_setattr: %v", stopped, err)
		}
		var st unix.Stat_t
		err = unix.Fstatat(tree, "f", &st, 0)
		unix.Close(tree)
		if err != nil {
			t.Fatal(err)
		}
		if st.Uid != host || st.Gid != host+1 {
			t.Errorf("stopped=%v: through the idmapped mount f is %d:%d, want %d:%d", stopped, st.Uid, st.Gid, host, host+1)
		}
	}
}

// TestIDMappedSourceRefusedClearly: a workspace on a mount that is
// id-mapped already (as a container runtime may give one) cannot be
// mapped again; root is refused with a message that says so, not with a
// bare "operation not permitted" or a wrong blame on the filesystem.
func TestIDMappedSourceRefusedClearly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmapped mounts need root on the host (the rootless path does not use them)")
	}
	src, ws := t.TempDir(), t.TempDir()
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ns, err := idmapUserns(0, 0, 3000000000, 3000000000, onStartThread)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		t.Fatalf("make an idmapped mount: %v", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, ws, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(ws, unix.MNT_DETACH)
	if !idmappedMount(ws) {
		t.Fatalf("%s is not seen as an idmapped mount", ws)
	}
	if idmappedMount(src) {
		t.Errorf("%s is seen as an idmapped mount", src)
	}
	err = CheckIDMap(ws, 2000000000, 2000000000)
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(fmt.Sprint(err), "id-mapped already") {
		t.Errorf("a workspace on an idmapped mount: %v", err)
	}
}

// TestHolderDiesWithMoat: the amd64 holder, a raw clone that waits with
// every signal blocked, dies with the moat process that started it (its
// parent-death signal, or, when moat was gone before it could set that,
// its parent check); it would otherwise wait on the host for ever. The
// moat here is this test binary run again (MOAT_TEST_HOLDER, see init),
// killed once its holder has started; this process takes the orphan
// (PR_SET_CHILD_SUBREAPER) and so can see how it ended.
func TestHolderDiesWithMoat(t *testing.T) {
	if !shareVM {
		t.Skip("this architecture's holder is started by os/exec, with its Pdeathsig")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	for round := range 10 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MOAT_TEST_HOLDER=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var pid int
		if _, err := fmt.Fscan(out, &pid); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the holder's pid: %v", round, err)
		}
		cmd.Process.Kill()
		cmd.Wait()
		deadline := time.Now().Add(5 * time.Second)
		for {
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG|unix.WALL, nil)
			if err != nil {
				t.Fatalf("round %d: wait for the holder: %v", round, err)
			}
			if got == pid {
				if !ws.Signaled() && ws.ExitStatus() == 0 {
					t.Fatalf("round %d: the holder ended with %v", round, ws)
				}
				break
			}
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				syscall.Wait4(pid, &ws, 0, nil)
				t.Fatalf("round %d: the holder outlived its moat by 5 s", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// init makes this test binary a moat that starts a holder, prints its pid
// and waits to be killed, for TestHolderDiesWithMoat.
func init() {
	if os.Getenv("MOAT_TEST_HOLDER") != "1" {
		return
	}
	pid, _, err := startHolderVM(func(f func()) { f() })
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(pid)
	time.Sleep(time.Hour)
	os.Exit(1)
}
