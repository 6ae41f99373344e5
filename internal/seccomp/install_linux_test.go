package seccomp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel tests re-run the test binary as a child in a helper mode,
// because an installed filter cannot be removed: the child installs it, tries
// system calls, and prints what happened as JSON.
const helperEnv = "MOAT_SECCOMP_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// runHelper runs the test binary in mode and returns its results.
func runHelper(t *testing.T, mode string) (map[string]string, error) {
	t.Helper()
	if NativeArch() == "" {
		t.Skipf("seccomp filters are not compiled for %s", runtime.GOARCH)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "MOAT_SECCOMP_DIR="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helper %s: %w; stderr:\n%s", mode, err, stderr.String())
	}
	res := map[string]string{}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("helper %s: %v; output %q; stderr:\n%s", mode, err, out, stderr.String())
	}
	return res, nil
}

func TestInstallDefault(t *testing.T) {
	res, err := runHelper(t, "default")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"unshare(CLONE_NEWUSER)":               "EPERM",
		"unshare on every pre-existing thread": "EPERM",
		"mount":                                "EPERM",
		"ptrace":                               "EPERM",
		"keyctl":                               "EPERM",
		"socket(AF_PACKET)":                    "EPERM",
		"socket(AF_INET, SOCK_RAW)":            "EPERM",
		"socket MPTCP":                         "EPERM",
		"socket(AF_NETLINK, NETLINK_AUDIT)":    "EPERM",
		"chmod u+s":                            "EPERM",
		"fchmodat g+s":                         "EPERM",
		"mode after chmod u+s":                 "-rwx------",
		"open O_CREAT u+s":                     "EPERM",
		"mknodat S_IFREG g+s":                  "EPERM",
		"openat2":                              "ENOSYS",
		"set-id files made":                    "none",
		"clone3":                               "ENOSYS",
		"ioctl TIOCSTI":                        "EPERM",
		"ioctl TIOCSTI, high bits set":         "EPERM",
		"personality(ADDR_NO_RANDOMIZE)":       "EPERM",

		"ioctl TCGETS":                      "ENOTTY", // allowed: /dev/null is no terminal
		"personality query":                 "ok",
		"chmod 0750":                        "ok",
		"open O_CREAT 0755":                 "ok",
		"mkdir g+s":                         "ok", // the kernel drops the bit
		"socket(AF_INET, SOCK_STREAM)":      "ok",
		"socket(AF_NETLINK, NETLINK_ROUTE)": "ok",
		"file write and read":               "ok",
		"exec /bin/true":                    "ok",
		"net.Listen tcp":                    "ok",
	}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("%s: got %q, want %q", k, res[k], v)
		}
	}
	for k, v := range res {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected result %s: %s", k, v)
		}
	}

	// Each refusal must come from the filter: without it, the probe fails
	// differently or succeeds. As non-root, some (mount, AF_PACKET) are
	// refused by the kernel anyway, and so prove less.
	control, err := runHelper(t, "control")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if (v == "EPERM" || v == "ENOSYS") && control[k] == v {
			if os.Geteuid() == 0 {
				t.Errorf("%s: %s without the filter too", k, v)
			} else {
				t.Logf("%s: %s without the filter too (not root), so this probe proves nothing here", k, v)
			}
		}
	}
}

// TestInstallStacked installs the floor and then a custom profile, as moat
// does for a custom profile: both hold.
func TestInstallStacked(t *testing.T) {
	res, err := runHelper(t, "stacked")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"mkdir":                  "EADDRNOTAVAIL", // the custom profile's errno 99
		"unshare(CLONE_NEWUSER)": "EPERM",         // the floor
		"open O_CREAT u+s":       "EPERM",         // the floor
		"exec /bin/true":         "ok",
	} {
		if res[k] != v {
			t.Errorf("%s: got %q, want %q", k, res[k], v)
		}
	}
}

func TestInstallNeedsNoNewPrivs(t *testing.T) {
	res, err := runHelper(t, "no-nnp")
	if err != nil {
		t.Fatal(err)
	}
	if res["install"] != "no_new_privs" {
		t.Errorf("install without no_new_privs: %s", res["install"])
	}
}

// TestX32Killed checks in the kernel that an x32 system call kills the process.
func TestX32Killed(t *testing.T) {
	if NativeArch() != ArchX86_64 {
		t.Skip("x32 is an x86_64 ABI")
	}
	_, err := runHelper(t, "x32")
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("helper survived an x32 system call: %v", err)
	}
	ws := exit.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Fatalf("helper ended with %v, want killed by SIGSYS", exit)
	}
}

// helper runs in the child; it returns the exit code.
func helper(mode string) int {
	res := map[string]string{}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if mode == "exec-check" {
		return execCheckHelper()
	}
	if mode == "exec-unsupervised" {
		return execUnsupervisedHelper()
	}
	if mode == "no-nnp" {
		err := Install([]Instruction{{Code: retK, K: retAllow}})
		switch {
		case errors.Is(err, ErrNoNewPrivs):
			res["install"] = "no_new_privs"
		case err == nil:
			res["install"] = "installed"
		default:
			res["install"] = err.Error()
		}
		return report(res)
	}

	// Threads that exist before the filter: TSYNC must cover them.
	const threads = 4
	start, done := make(chan struct{}), make(chan error)
	for range threads {
		go func() {
			runtime.LockOSThread()
			<-start
			done <- unix.Unshare(unix.CLONE_NEWUSER)
		}()
	}

	if err := setNoNewPrivs(); err != nil {
		return fail(err)
	}
	arch := NativeArch()
	switch mode {
	case "default":
		if err := Install(mustCompileHelper(Default(), arch)); err != nil {
			return fail(err)
		}
	case "control":
		// The same probes without a filter.
	case "stacked":
		if err := Install(mustCompileHelper(Floor(), arch)); err != nil {
			return fail(err)
		}
		custom := &Profile{DefaultAction: Allow, Rules: []Rule{{Names: []string{"mkdir", "mkdirat"}, Action: Errno, Errno: 99}}}
		if err := Install(mustCompileHelper(custom, arch)); err != nil {
			return fail(err)
		}
		res["mkdir"] = errName(os.Mkdir(filepath.Join(os.Getenv("MOAT_SECCOMP_DIR"), "d"), 0o755))
		res["unshare(CLONE_NEWUSER)"] = errName(unix.Unshare(unix.CLONE_NEWUSER))
		res["open O_CREAT u+s"] = errName(createMode(filepath.Join(os.Getenv("MOAT_SECCOMP_DIR"), "s"), 0o4755))
		res["exec /bin/true"] = errName(exec.Command("/bin/true").Run())
		return report(res)
	case "x32":
		if err := Install(mustCompileHelper(Default(), arch)); err != nil {
			return fail(err)
		}
		unix.Syscall(x32SyscallBit|unix.SYS_GETPID, 0, 0, 0)
		return report(map[string]string{"x32": "survived"})
	default:
		return fail(fmt.Errorf("unknown helper mode %q", mode))
	}

	close(start)
	var results []string
	for range threads {
		results = append(results, errName(<-done))
	}
	res["unshare on every pre-existing thread"] = strings.Join(dedupe(results), ",")
	// Without the filter these fail in other ways (a Go process cannot
	// unshare a user namespace, the mount point does not exist, no process
	// has that pid...), so EPERM can only come from the filter.
	res["unshare(CLONE_NEWUSER)"] = errName(unix.Unshare(unix.CLONE_NEWUSER))
	res["mount"] = errName(unix.Mount("/", "/nonexistent/moat-seccomp", "", unix.MS_BIND, ""))
	res["ptrace"] = errName(syscallErr(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 0x7ffffff0, 0))
	res["keyctl"] = errName(syscallErr(unix.SYS_KEYCTL, 0x7fffffff, 0, 0))
	res["socket(AF_PACKET)"] = socketErr(unix.AF_PACKET, unix.SOCK_RAW, 0x300)
	res["socket(AF_INET, SOCK_RAW)"] = socketErr(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	res["socket MPTCP"] = socketErr(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP)
	res["socket(AF_NETLINK, NETLINK_AUDIT)"] = socketErr(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)
	res["socket(AF_INET, SOCK_STREAM)"] = socketErr(unix.AF_INET, unix.SOCK_STREAM, 0)
	res["socket(AF_NETLINK, NETLINK_ROUTE)"] = socketErr(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	res["clone3"] = errName(syscallErr(unix.SYS_CLONE3, 0, 0, 0))
	res["personality query"] = errName(syscallErr(unix.SYS_PERSONALITY, 0xffffffff, 0, 0))
	res["personality(ADDR_NO_RANDOMIZE)"] = errName(syscallErr(unix.SYS_PERSONALITY, 0x0040000, 0, 0))

	file := filepath.Join(os.Getenv("MOAT_SECCOMP_DIR"), "f")
	res["file write and read"] = errName(writeRead(file))
	res["chmod u+s"] = errName(os.Chmod(file, os.ModeSetuid|0o700))
	res["fchmodat g+s"] = errName(unix.Fchmodat(unix.AT_FDCWD, file, 0o2700, 0))
	if fi, err := os.Stat(file); err == nil {
		res["mode after chmod u+s"] = fi.Mode().String()
	}
	res["chmod 0750"] = errName(os.Chmod(file, 0o750))
	dir := os.Getenv("MOAT_SECCOMP_DIR")
	unix.Umask(0)
	res["open O_CREAT u+s"] = errName(createMode(filepath.Join(dir, "open-setuid"), 0o4755))
	res["mknodat S_IFREG g+s"] = errName(unix.Mknodat(unix.AT_FDCWD, filepath.Join(dir, "mknod-setgid"), unix.S_IFREG|0o2755, 0))
	res["open O_CREAT 0755"] = errName(createMode(filepath.Join(dir, "open-plain"), 0o755))
	res["mkdir g+s"] = errName(unix.Mkdir(filepath.Join(dir, "mkdir-setgid"), 0o2755))
	how := unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC, Mode: 0o4755}
	if fd, err := unix.Openat2(unix.AT_FDCWD, filepath.Join(dir, "openat2-setuid"), &how); err != nil {
		res["openat2"] = errName(err)
	} else {
		unix.Close(fd)
		res["openat2"] = "ok"
	}
	res["set-id files made"] = setidFiles(dir)

	if null, err := os.Open("/dev/null"); err == nil {
		c := byte('x')
		p := uintptr(unsafe.Pointer(&c))
		res["ioctl TIOCSTI"] = errName(syscallErr(unix.SYS_IOCTL, null.Fd(), unix.TIOCSTI, p))
		res["ioctl TIOCSTI, high bits set"] = errName(syscallErr(unix.SYS_IOCTL, null.Fd(), 0xdead0000_00000000|unix.TIOCSTI, p))
		var termios unix.Termios
		res["ioctl TCGETS"] = errName(syscallErr(unix.SYS_IOCTL, null.Fd(), unix.TCGETS, uintptr(unsafe.Pointer(&termios))))
		null.Close()
	}
	res["exec /bin/true"] = errName(exec.Command("/bin/true").Run())
	if l, err := net.Listen("tcp", "127.0.0.1:0"); err != nil {
		res["net.Listen tcp"] = err.Error()
	} else {
		res["net.Listen tcp"] = "ok"
		l.Close()
	}
	return report(res)
}

// createMode creates path with mode, as open(2) with O_CREAT does.
func createMode(path string, mode uint32) error {
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, mode)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// setidFiles lists the names in dir whose mode has a set-id bit, or
// "none".
func setidFiles(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var found []string
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			found = append(found, e.Name())
		}
	}
	if len(found) == 0 {
		return "none"
	}
	return strings.Join(found, ",")
}

// setNoNewPrivs sets no_new_privs on every thread, as moat's init does. A
// test binary built with cgo cannot use AllThreadsSyscall: it then sets it
// on the calling thread, locked, and Install's TSYNC passes it on to the
// other threads.
func setNoNewPrivs() error {
	_, _, errno := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0)
	if errno == syscall.ENOTSUP {
		runtime.LockOSThread()
		return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	}
	if errno != 0 {
		return fmt.Errorf("set no_new_privs: %w", errno)
	}
	return nil
}

func mustCompileHelper(p *Profile, arch string) []Instruction {
	prog, err := Compile(p, arch)
	if err != nil {
		panic(err)
	}
	return prog
}

func report(res map[string]string) int {
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

func syscallErr(nr, a1, a2, a3 uintptr) error {
	if _, _, errno := unix.Syscall(nr, a1, a2, a3); errno != 0 {
		return errno
	}
	return nil
}

func socketErr(family, typ, proto int) string {
	fd, err := unix.Socket(family, typ, proto)
	if err == nil {
		unix.Close(fd)
	}
	return errName(err)
}

func writeRead(path string) error {
	if err := os.WriteFile(path, []byte("moat"), 0o700); err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if string(b) != "moat" {
		return fmt.Errorf("read %q", b)
	}
	return nil
}

// errName is "ok", the errno's name (EPERM), or the error's text.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return err.Error()
}

func dedupe(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
