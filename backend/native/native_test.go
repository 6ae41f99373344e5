//go:build linux

package native_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/internal/hostinfo"
	"github.com/moatbox/moat/internal/proctest"
	"github.com/moatbox/moat/internal/rt0"
	"github.com/moatbox/moat/internal/seccomp"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

func TestMain(m *testing.M) {
	native.MaybeInit()
	if marker := os.Getenv("MOAT_TEST_SESSION_CALLER"); marker != "" {
		sessionCaller(marker)
	}
	os.Exit(m.Run())
}

// spec compiles the default policy for a workspace, as the sandbox
// package would.
func spec(t testing.TB, ws string, args ...string) *backend.Spec {
	t.Helper()
	s, err := compileSpec(ws, args...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func compileSpec(ws string, args ...string) (*backend.Spec, error) {
	p := policy.Default()
	p.Workspace.Path = ws
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		return nil, err
	}
	c := sandbox.CurrentCaller()
	c.Cwd = ws
	g, err := workspace.NewGuard(ws, workspace.GuardOptions{Extra: p.Workspace.Protect, Writable: true})
	if err != nil {
		return nil, err
	}
	return sandbox.Compile(p, args, c, sandbox.NewRunID(), nil, []*workspace.Guard{g})
}

// TestLandlockHoldsAlone widens the mount layer on purpose: an extra
// directory is bound read-write but left out of the Landlock rules. The
// write must still fail, because Landlock alone refuses it.
func TestLandlockHoldsAlone(t *testing.T) {
	b := &native.Backend{}
	if b.Capabilities().LandlockABI == 0 {
		t.Skip("this kernel has no Landlock")
	}
	ws := t.TempDir()
	extra := t.TempDir()
	os.WriteFile(filepath.Join(extra, "existing"), []byte("data"), 0o644)
	// Mounted outside every granted hierarchy (Landlock rules follow the
	// path, so a target under /tmp would inherit /tmp's grant).
	target := "/opt/moat-widened"
	s := spec(t, ws, "/bin/sh", "-c", `
echo a > `+target+`/new && echo WROTE-new
cat `+target+`/existing >/dev/null && echo READ-existing
echo b > `+ws+`/ok && echo ws-ok`)
	s.Mounts = append(s.Mounts, backend.Mount{Kind: backend.MountBind, Source: extra, Target: target, IDMap: os.Geteuid() == 0, NoLandlockGrant: true})
	var out, errb bytes.Buffer
	st, err := b.Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "WROTE") || strings.Contains(out.String(), "READ") {
		t.Errorf("Landlock did not refuse access to the widened mount:\n%s%s", out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "ws-ok") || st.ExitCode != 0 {
		t.Errorf("the workspace was not writable (exit %d):\n%s%s", st.ExitCode, out.String(), errb.String())
	}
	if _, err := os.Stat(filepath.Join(extra, "new")); err == nil {
		t.Error("file created on the host")
	}

	// Control: granted in Landlock too, the same write works, so the
	// refusal above came from Landlock and not from the mount.
	s.Mounts[len(s.Mounts)-1].NoLandlockGrant = false
	out.Reset()
	if _, err := b.Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "WROTE-new") || !strings.Contains(out.String(), "READ-existing") {
		t.Errorf("control run could not write and read through the granted mount:\n%s%s", out.String(), errb.String())
	}
}

// TestInitFailureIsReported: a setup failure inside init comes back as
// data naming the stage, not as "exit status 1".
func TestInitFailureIsReported(t *testing.T) {
	ws := t.TempDir()
	s := spec(t, ws, "/bin/true")
	s.Mounts = append(s.Mounts, backend.Mount{Kind: backend.MountBind, Source: "/no/such/dir", Target: "/x"})
	_, err := (&native.Backend{}).Run(context.Background(), s, backend.Stdio{})
	var ie *backend.InitError
	if err == nil || !strings.Contains(err.Error(), "/no/such/dir") {
		t.Fatalf("err %v, want the failing bind named", err)
	}
	if !errorsAs(err, &ie) || !strings.HasPrefix(ie.Stage, "bind") {
		t.Fatalf("err %v: no init stage", err)
	}
}

// TestProxyListenerReachesHost: in proxy mode, 127.0.0.1:PORT inside the
// sandbox is a listener the host side accepts on, and nothing else is
// reachable.
func TestProxyListenerReachesHost(t *testing.T) {
	ws := t.TempDir()
	s := spec(t, ws, "python3", "-c", `
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
print(s.recv(100).decode().strip())
try:
    socket.create_connection(("1.1.1.1", 80), timeout=1)
    print("OUTSIDE-REACHED")
except OSError as e:
    print("outside refused")
`)
	s.Network = backend.Network{Mode: backend.NetProxy, ProxyPort: 3128}
	served := make(chan struct{}, 1)
	serve := func(l net.Listener) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HELLO-FROM-HOST\n"))
			c.Close()
			served <- struct{}{}
		}
	}
	var out, errb bytes.Buffer
	st, err := (&native.Backend{}).Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb, ServeProxy: serve})
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 0 || !strings.Contains(out.String(), "HELLO-FROM-HOST") || !strings.Contains(out.String(), "outside refused") {
		t.Fatalf("exit %d\n%s%s", st.ExitCode, out.String(), errb.String())
	}
	select {
	case <-served:
	default:
		t.Error("the host side served no connection")
	}
}

// TestOverlayWorkspace: the workspace as an overlay leaves the real
// directory untouched and records every change in the upper layer.
func TestOverlayWorkspace(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("original\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "gone.txt"), []byte("bye\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "dir/sub"), 0o755)
	layers := t.TempDir()
	os.Mkdir(filepath.Join(layers, "upper"), 0o755)
	os.Mkdir(filepath.Join(layers, "work"), 0o755)
	// overlayfs leaves work/work with mode 0: open it up for removal.
	t.Cleanup(func() { os.Chmod(filepath.Join(layers, "work", "work"), 0o700) })
	s := spec(t, ws, "/bin/sh", "-c", `set -e
echo changed > keep.txt; echo new > new.txt; rm gone.txt; rm -r dir; mkdir dir; echo x > dir/y
ln -s keep.txt link; chmod 600 new.txt; cat keep.txt new.txt; ls`)
	for i, m := range s.Mounts {
		if m.Kind == backend.MountBind && m.Source == ws {
			s.Mounts[i] = backend.Mount{Kind: backend.MountOverlay, Source: ws, Target: ws, Layers: layers, IDMap: m.IDMap}
		}
	}
	var out, errb bytes.Buffer
	st, err := (&native.Backend{}).Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 0 || !strings.Contains(out.String(), "changed\nnew\n") {
		t.Fatalf("exit %d\n%s%s", st.ExitCode, out.String(), errb.String())
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "keep.txt")); string(b) != "original\n" {
		t.Errorf("real keep.txt changed: %q", b)
	}
	for _, p := range []string{"gone.txt", "dir/sub"} {
		if _, err := os.Stat(filepath.Join(ws, p)); err != nil {
			t.Errorf("real %s was removed: %v", p, err)
		}
	}
	for _, p := range []string{"new.txt", "link", "dir/y"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s appeared in the real workspace", p)
		}
	}
	up := filepath.Join(layers, "upper")
	if b, _ := os.ReadFile(filepath.Join(up, "keep.txt")); string(b) != "changed\n" {
		t.Errorf("upper keep.txt: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(up, "gone.txt")); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("no whiteout for gone.txt in the upper layer: %v", err)
	}
}

// TestCheckIDMap: what moat doctor tells root about a workspace's
// filesystem is what a run would do there. A directory on this machine's
// disk can be id-mapped; a tmpfs only from Linux 6.3 on, and before that
// the answer is the run's own refusal. Nothing stays mounted.
func TestCheckIDMap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root id-maps workspaces (an ordinary caller's files are its own)")
	}
	before, _ := os.ReadFile("/proc/self/mountinfo")
	p := policy.Default()
	disk := t.TempDir()
	if err := native.CheckIDMap(disk, p.User.HostUID, p.User.HostGID); err != nil {
		t.Errorf("%s: %v", disk, err)
	}
	tmpfs := t.TempDir()
	if err := unix.Mount("moattest", tmpfs, "tmpfs", 0, "mode=755"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	defer unix.Unmount(tmpfs, unix.MNT_DETACH)
	err := native.CheckIDMap(tmpfs, p.User.HostUID, p.User.HostGID)
	major, minor := hostinfo.KernelVersion()
	if major > 6 || major == 6 && minor >= 3 {
		if err != nil {
			t.Errorf("tmpfs on Linux %d.%d: %v", major, minor, err)
		}
	} else if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(fmt.Sprint(err), "tmpfs") {
		t.Errorf("tmpfs on Linux %d.%d: got %v, want the refusal naming tmpfs", major, minor, err)
	}
	unix.Unmount(tmpfs, unix.MNT_DETACH)
	if after, _ := os.ReadFile("/proc/self/mountinfo"); !bytes.Equal(before, after) {
		t.Errorf("mounts changed:\n%s\n---\n%s", before, after)
	}
}

// TestDirectStartMatchesInitStage builds the same sandbox through the
// direct start and through the init stage and compares what the command
// sees: identity, capabilities, limits, the whole mount table (mount
// points, options, file system types and their options), and what it may
// read, write, list and execute under each kind of mount, Landlock
// included, with and without a disk limit. The direct start decides from a
// plan made on the host what the init stage decides while it runs; any
// drift between the two shows here. A session's commands, the first and a
// later one, must see what a one-shot command sees too.
func TestDirectStartMatchesInitStage(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	ro, rw, hidden, lower, layers := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(lower, "f"), []byte("lower"), 0o644)
	os.WriteFile(filepath.Join(ro, "f"), []byte("ro"), 0o644)
	os.WriteFile(filepath.Join(ro, "file"), []byte("host"), 0o644)
	os.WriteFile(filepath.Join(hidden, "f"), []byte("x"), 0o644)
	probe := `
id -u; id -g; hostname
grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status
ulimit -c; ulimit -n; ulimit -f; ulimit -t
ls -a / /dev | tr '\n' ' '; echo
readlink /bin /dev/fd /dev/ptmx
stat -c '%a %U %n' /tmp "$HOME" /dev/shm
awk '{ split($0, h, " - "); print $5, $6, h[2] }' /proc/self/mountinfo | sed 's/,size=[0-9]*k//'
for p in / /usr /etc /tmp "$HOME" /dev /dev/shm /proc "$PWD" "$PWD/.git/hooks" /opt/moat-ro /opt/moat-rw /opt/moat-gone /opt/moat-hidden; do
  ls "$p" >/dev/null 2>&1 && echo "list $p"
  (echo x > "$p/.probe") 2>/dev/null && echo "write $p"
  cat "$p/f" >/dev/null 2>&1 && echo "read $p/f"
done
cat /etc/shadow >/dev/null 2>&1 && echo "read /etc/shadow"
cat /opt/moat-ro/file && echo
cp /bin/true /tmp/t && /tmp/t && echo "exec /tmp"
cp /bin/true "$PWD/t" && "$PWD/t" && echo "exec workspace"
kill -0 1 2>/dev/null && echo "signal init"
mv "$PWD/.git" "$PWD/.git-moved" 2>/dev/null && echo "renamed .git"
echo x > "$PWD/.git/objects-probe" && echo "write .git"
awk '$4 == "0A" { print "listening", $2 }' /proc/net/tcp
cat /opt/moat-overlay/f && echo x > /opt/moat-overlay/new && echo " overlay written"
echo done`
	disk := false // a disk limit, which takes no overlay in the direct start
	mk := func() *backend.Spec {
		s := spec(t, ws, "/bin/sh", "-c", probe)
		idmap := os.Geteuid() == 0
		s.Mounts = append(s.Mounts,
			backend.Mount{Kind: backend.MountBind, Source: ro, Target: "/opt/moat-ro", ReadOnly: true, IDMap: idmap},
			backend.Mount{Kind: backend.MountBind, Source: rw, Target: "/opt/moat-rw", IDMap: idmap},
			backend.Mount{Kind: backend.MountBind, Source: "/no/such/dir", Target: "/opt/moat-gone", Optional: true},
			backend.Mount{Kind: backend.MountBind, Source: hidden, Target: "/opt/moat-hidden", IDMap: idmap},
			backend.Mount{Kind: backend.MountMask, Target: "/opt/moat-hidden"},
			backend.Mount{Kind: backend.MountFile, Target: "/opt/moat-ro/file", Data: "file-data"},
			backend.Mount{Kind: backend.MountSymlink, Source: "/opt/moat-ro", Target: "/opt/moat-link"},
		)
		s.Network = backend.Network{Mode: backend.NetProxy, ProxyPort: 3128}
		if disk {
			s.Limits.DiskBytes = 10 << 20
			return s
		}
		// An overlay, with fresh upper and work layers for each run.
		os.RemoveAll(filepath.Join(layers, "upper"))
		os.RemoveAll(filepath.Join(layers, "work"))
		os.Mkdir(filepath.Join(layers, "upper"), 0o755)
		os.Mkdir(filepath.Join(layers, "work"), 0o755)
		s.Mounts = append(s.Mounts, backend.Mount{Kind: backend.MountOverlay, Source: lower, Layers: layers, Target: "/opt/moat-overlay"})
		return s
	}
	serve := func(l net.Listener) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}
	runWith := func(b *native.Backend) string {
		var out, errb bytes.Buffer
		st, err := b.Run(context.Background(), mk(), backend.Stdio{Stdout: &out, Stderr: &errb, ServeProxy: serve})
		if err != nil {
			t.Fatalf("init stage %v: %v", b.InitStage, err)
		}
		if st.ExitCode != 0 || !strings.HasSuffix(out.String(), "done\n") {
			t.Fatalf("init stage %v: exit %d\n%s%s", b.InitStage, st.ExitCode, out.String(), errb.String())
		}
		return out.String()
	}
	// A session's commands, the first and a later one, see what a
	// one-shot run's command does.
	inSession := func() {
		t.Helper()
		want := runWith(&native.Backend{InitStage: true})
		s := mk() // fresh overlay layers, which the session keeps mounted
		inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{ServeProxy: serve})
		if err != nil {
			t.Fatalf("session: %v", err)
		}
		defer inst.Destroy(context.Background())
		for i := range 2 {
			var out bytes.Buffer
			p, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: s.Args, Env: s.Env, Dir: s.Dir}, backend.Stdio{Stdout: &out})
			if err != nil {
				t.Fatalf("session: %v", err)
			}
			if st, err := p.Wait(); err != nil || st.ExitCode != 0 || out.String() != want {
				t.Errorf("disk %v: a session's command %d differs from a one-shot run's (%v, %+v):\n--- session\n%s\n--- one-shot\n%s", disk, i, err, st, out.String(), want)
			}
		}
	}
	direct, staged := runWith(&native.Backend{}), runWith(&native.Backend{InitStage: true})
	if direct != staged {
		t.Errorf("the direct start differs from the init stage:\n--- direct\n%s\n--- init stage\n%s", direct, staged)
	}
	inSession()
	// The forked direct start, which other architectures (arm64) use.
	if forked := runWith(&native.Backend{ForkStart: true}); forked != staged {
		t.Errorf("the forked direct start differs from the init stage:\n--- forked\n%s\n--- init stage\n%s", forked, staged)
	}
	// Each refusal below has its positive control here: the same probe
	// succeeding on a path the spec allows (read /opt/moat-ro/f against
	// the hidden f, write /opt/moat-rw against /opt/moat-ro, and so on).
	for _, want := range []string{"list /opt/moat-ro\n", "read /opt/moat-ro/f\n", "write /opt/moat-rw\n", "write /tmp\n", "write " + ws + "\n", "file-data\n", "exec workspace\n",
		"lower overlay written\n", "listening 0100007F:0C38\n", "1777 agent /tmp\n", "write .git\n"} {
		if !strings.Contains(direct, want) {
			t.Errorf("probe lacks %q:\n%s", want, direct)
		}
	}
	for _, never := range []string{"write /opt/moat-ro\n", "read /opt/moat-hidden/f\n", "read /etc/shadow\n", "write /usr\n", "write " + ws + "/.git/hooks\n", "renamed .git\n"} {
		if strings.Contains(direct, never) {
			t.Errorf("probe shows %q:\n%s", never, direct)
		}
	}

	// Under a disk limit, /tmp, home and /dev/shm are directories of one
	// sized tmpfs (see disk_linux.go), in both starts.
	disk = true
	direct, staged = runWith(&native.Backend{}), runWith(&native.Backend{InitStage: true})
	if direct != staged {
		t.Errorf("under a disk limit, the direct start differs from the init stage:\n--- direct\n%s\n--- init stage\n%s", direct, staged)
	}
	if forked := runWith(&native.Backend{ForkStart: true}); forked != staged {
		t.Errorf("under a disk limit, the forked direct start differs from the init stage:\n--- forked\n%s\n--- init stage\n%s", forked, staged)
	}
	inSession()
	if !strings.Contains(direct, "1777 agent /dev/shm\n") {
		t.Errorf("probe under a disk limit:\n%s", direct)
	}
}

// TestCommandKeepsMoatsTimerSlack: moat's entry point raises the timer
// slack of the threads that start a run (see package rt0); the command
// must start with the slack moat itself started with, in every start. The
// test binary has no entry point: it pretends one saw 123456 ns, while its
// threads have their own (the default 50 µs), which the command would
// inherit from the thread that started it.
func TestCommandKeepsMoatsTimerSlack(t *testing.T) {
	const want = 123456
	t.Cleanup(rt0.SetSlackForTesting(want))
	ws := t.TempDir()
	for _, b := range []*native.Backend{{}, {ForkStart: true}, {InitStage: true}} {
		var out, errb bytes.Buffer
		st, err := b.Run(context.Background(), spec(t, ws, "cat", "/proc/self/timerslack_ns"), backend.Stdio{Stdout: &out, Stderr: &errb})
		if err != nil || st.ExitCode != 0 {
			t.Fatalf("%+v: exit %v, %v: %s", *b, st, err, errb.String())
		}
		if got := strings.TrimSpace(out.String()); got != fmt.Sprint(want) {
			t.Errorf("%+v: the command's timer slack is %s ns, want moat's own, %d", *b, got, want)
		}
	}
}

// TestLockedExitsDoNotEndRuns: a goroutine that ends while locked to its
// OS thread makes the Go runtime end that thread, and the kernel sends
// the parent-death signal (SIGKILL) to the processes the thread started.
// Code embedding moat may do that at any time; a run must not die of it.
// Each start is tried while goroutines keep ending locked; before inits
// were started from a thread kept for that, most such runs were killed.
func TestLockedExitsDoNotEndRuns(t *testing.T) {
	ws := t.TempDir()
	for _, b := range []*native.Backend{{}, {ForkStart: true}, {InitStage: true}} {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var ended sync.WaitGroup
				for range 8 {
					ended.Add(1)
					go func() {
						defer ended.Done()
						runtime.LockOSThread() // and never unlocked: the thread ends
						time.Sleep(time.Millisecond)
					}()
				}
				ended.Wait()
			}
		}()
		for round := range 5 {
			var out, errb bytes.Buffer
			st, err := b.Run(context.Background(), spec(t, ws, "/bin/sh", "-c", "sleep 0.2; echo done"), backend.Stdio{Stdout: &out, Stderr: &errb})
			if err != nil {
				t.Fatalf("init stage %v, fork %v: %v", b.InitStage, b.ForkStart, err)
			}
			if st.ExitCode != 0 || out.String() != "done\n" {
				t.Errorf("init stage %v, fork %v, round %d: exit %d, signal %v: the run died with a thread of this process\n%s",
					b.InitStage, b.ForkStart, round, st.ExitCode, st.Signal, errb.String())
			}
		}
		close(stop)
		wg.Wait()
	}
}

// TestNprocRlimitCountsOneSandbox: a process limit enforced by
// RLIMIT_NPROC (Limits.PidsRlimit) counts the tasks of its own sandbox
// only: neither the caller's processes on the host nor those of another
// sandbox of the same caller, running meanwhile, take from it. Each
// start sets it; the init stage's threads count against it.
func TestNprocRlimitCountsOneSandbox(t *testing.T) {
	if !native.NprocPerUserns() {
		t.Skip("RLIMIT_NPROC is counted per user namespace only from Linux 5.14")
	}
	// The caller's own processes, more than the limit.
	for i := 0; i < 80; i++ {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	const count = `
import os, sys, time
n = 0
try:
    while n < 300:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
        if n == int(sys.argv[1]):
            open("held", "w").close()
            time.sleep(60)
except OSError as e:
    print("refused:", e, file=sys.stderr)
print(n, flush=True)
os._exit(0)
`
	for _, initStage := range []bool{false, true} {
		t.Run(fmt.Sprintf("init stage %v", initStage), func(t *testing.T) {
			b := &native.Backend{InitStage: initStage}
			limited := func(ws string, hold int) *backend.Spec {
				s := spec(t, ws, "python3", "-c", count, fmt.Sprint(hold))
				s.Limits.Pids, s.Limits.PidsRlimit = 64, true
				s.Limits.Wall = 30 * time.Second
				return s
			}
			// Another sandbox holds 40 tasks meanwhile.
			other := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := b.Run(ctx, limited(other, 40), backend.Stdio{})
				done <- err
			}()
			defer func() { cancel(); <-done }()
			for i := 0; ; i++ {
				if _, err := os.Stat(filepath.Join(other, "held")); err == nil {
					break
				}
				if i == 200 {
					t.Fatal("the other sandbox did not start its 40 tasks")
				}
				time.Sleep(50 * time.Millisecond)
			}
			var out, errb bytes.Buffer
			st, err := b.Run(context.Background(), limited(t.TempDir(), 0), backend.Stdio{Stdout: &out, Stderr: &errb})
			if err != nil || st.ExitCode != 0 {
				t.Fatalf("err %v exit %+v\n%s", err, st, errb.String())
			}
			n, _ := strconv.Atoi(strings.TrimSpace(out.String()))
			if n < 40 || n >= 64 || !strings.Contains(errb.String(), "refused") {
				t.Errorf("%d forks under a limit of 64 (%s): want fewer than 64, and no fewer than 40", n, strings.TrimSpace(errb.String()))
			}
		})
	}
}

// TestLandlockFileBinds: a bind of a single file (--ro FILE, --rw FILE)
// gets a Landlock rule of file rights only, which the kernel accepts (a
// directory's rights on a file are EINVAL), in both starts; the read-only
// one stays unwritable, by Landlock as by the mount.
func TestLandlockFileBinds(t *testing.T) {
	if (&native.Backend{}).Capabilities().LandlockABI == 0 {
		t.Skip("this kernel has no Landlock")
	}
	dir := t.TempDir()
	roFile, rwFile := filepath.Join(dir, "ro"), filepath.Join(dir, "rw")
	for _, b := range []*native.Backend{{}, {InitStage: true}} {
		os.WriteFile(roFile, []byte("ro-data\n"), 0o644)
		os.WriteFile(rwFile, []byte("rw-data\n"), 0o666)
		ws := t.TempDir()
		s := spec(t, ws, "/bin/sh", "-c", `
cat /opt/moat-rofile /opt/moat-rwfile
echo new > /opt/moat-rwfile && echo wrote-rw
(echo new > /opt/moat-rofile) 2>/dev/null && echo WROTE-RO
echo done`)
		idmap := os.Geteuid() == 0
		s.Mounts = append(s.Mounts,
			backend.Mount{Kind: backend.MountBind, Source: roFile, Target: "/opt/moat-rofile", ReadOnly: true, IDMap: idmap},
			backend.Mount{Kind: backend.MountBind, Source: rwFile, Target: "/opt/moat-rwfile", IDMap: idmap})
		var out, errb bytes.Buffer
		st, err := b.Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatalf("init stage %v: %v", b.InitStage, err)
		}
		if want := "ro-data\nrw-data\nwrote-rw\ndone\n"; st.ExitCode != 0 || out.String() != want || st.LandlockABI == 0 {
			t.Errorf("init stage %v: exit %d, Landlock ABI %d, output %q, want %q\n%s", b.InitStage, st.ExitCode, st.LandlockABI, out.String(), want, errb.String())
		}
		if got, _ := os.ReadFile(rwFile); string(got) != "new\n" {
			t.Errorf("init stage %v: the rw file holds %q", b.InitStage, got)
		}
	}
}

// TestCustomProfileAtExec: a profile marked SeccompAtExec holds the
// command only. This one refuses wait4, which init needs once the command
// has started: both direct starts (sharing moat's memory and forking) run
// the command under it and report what it refused through the observed
// filter; the init stage, which must install it on itself, refuses the run
// at the install, naming wait4, instead of running on under it, and runs
// the command under a profile that leaves init what it needs.
func TestCustomProfileAtExec(t *testing.T) {
	if seccomp.NativeArch() == "" {
		t.Skip("no seccomp filters for this architecture")
	}
	ws := t.TempDir()
	noMkdir := seccomp.Rule{Names: []string{"mkdir", "mkdirat"}, Action: seccomp.Errno, Errno: uint32(syscall.EACCES)}
	custom := &seccomp.Profile{DefaultAction: seccomp.Allow, Rules: []seccomp.Rule{
		{Names: []string{"wait4"}, Action: seccomp.Errno, Errno: uint32(syscall.EPERM)}, noMkdir,
	}}
	run := func(b *native.Backend, p *seccomp.Profile) (*backend.ExitStatus, string, error) {
		s := spec(t, ws, "mkdir", "/tmp/d")
		s.Seccomp, s.SeccompAtExec = []*seccomp.Profile{p, seccomp.Floor()}, true
		var errb bytes.Buffer
		st, err := b.Run(context.Background(), s, backend.Stdio{Stderr: &errb})
		return st, errb.String(), err
	}
	for _, b := range []*native.Backend{{}, {ForkStart: true}, {InitStage: true}} {
		st, errs, err := run(b, custom)
		if b.InitStage {
			var ie *backend.InitError
			if !errors.As(err, &ie) || ie.Stage != "install seccomp filter 1" || !strings.Contains(ie.Error(), "wait4") {
				t.Errorf("%+v: %v, %v: want an init error at install seccomp filter 1 naming wait4", *b, st, err)
			}
			st, errs, err = run(b, &seccomp.Profile{DefaultAction: seccomp.Allow, Rules: []seccomp.Rule{noMkdir}})
		}
		if err != nil || st.ExitCode != 1 || !strings.Contains(errs, "Permission denied") {
			t.Fatalf("%+v: %+v, %v, stderr %q: want mkdir to fail with EACCES", *b, st, err, errs)
		}
		found := false
		for _, d := range st.Denials {
			found = found || d.What == "mkdir" || d.What == "mkdirat"
		}
		if !found {
			t.Errorf("%+v: denials %+v: want mkdir's", *b, st.Denials)
		}
	}
}

// TestInitCrashIsReported: whatever the init stage's Go runtime prints as
// it dies goes to moat, which reports init's failure with its first line,
// and never to the command's stderr, which belongs to the user. No signal
// sent to init crashes it (TestSignalsToInitAreIgnored in package
// sandbox), so the test makes it fault: its main thread is sent to
// address 0 (ptrace, as root).
// jumpToZero makes the thread pid continue at address 0, where it faults.
func jumpToZero(pid int) error {
	runtime.LockOSThread() // ptrace requests come from the tracer's thread
	defer runtime.UnlockOSThread()
	if err := unix.PtraceAttach(pid); err != nil {
		return err
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		return err
	}
	var regs unix.PtraceRegs
	if err := unix.PtraceGetRegs(pid, &regs); err != nil {
		unix.PtraceDetach(pid)
		return err
	}
	setPC(&regs, 0)
	if err := unix.PtraceSetRegs(pid, &regs); err != nil {
		unix.PtraceDetach(pid)
		return err
	}
	return unix.PtraceDetach(pid)
}

func TestInitCrashIsReported(t *testing.T) {
	ws := t.TempDir()
	s := spec(t, ws, "sleep", "30")
	var errb bytes.Buffer
	type result struct {
		st  *backend.ExitStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := (&native.Backend{InitStage: true}).Run(context.Background(), s, backend.Stdio{Stderr: &errb})
		done <- result{st, err}
	}()
	// Init is this process's child that is PID 1 of a namespace of its
	// own; once the command runs, a signal from outside the namespace
	// that the runtime does not ignore makes it crash with a dump.
	init := 0
	for i := 0; i < 500 && init == 0; i++ {
		time.Sleep(10 * time.Millisecond)
		for _, pid := range proctest.Children(os.Getpid()) {
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			for _, l := range strings.Split(string(status), "\n") {
				if f := strings.Fields(l); len(f) == 3 && f[0] == "NSpid:" && f[2] == "1" {
					if kids := proctest.Children(pid); len(kids) > 0 {
						init = pid
					}
				}
			}
		}
	}
	if init == 0 {
		t.Fatal("no init stage with a running command among this process's children")
	}
	if err := jumpToZero(init); err != nil {
		t.Skipf("cannot make init fault (ptrace: %v); root with CAP_SYS_PTRACE can", err)
	}
	r := <-done
	var ie *backend.InitError
	if !errors.As(r.err, &ie) || ie.Stage != "init" || !strings.Contains(ie.Error(), "SIGSEGV") {
		t.Errorf("run: %+v, %v: want an init error naming SIGSEGV", r.st, r.err)
	}
	if strings.Contains(errb.String(), "goroutine") || strings.Contains(errb.String(), "SIGSEGV") {
		t.Errorf("init's crash reached the command's stderr:\n%s", errb.String())
	}
}
