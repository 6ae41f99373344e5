//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Where the guest finds things. The initramfs holds this program and the
// kernel modules. The host's root arrives read-only over 9p and becomes the
// guest's root; two more read-only 9p shares bring the test binaries with
// the plan, and the source tree (tests run in their package directory, as
// go test runs them). /tmp is an ext4 disk of the guest's own, as on most
// hosts, and every other writable place a tmpfs.
const (
	modulesDir = "/modules"
	newRoot    = "/newroot"
	binDir     = "/mnt/bin"
	srcDir     = "/mnt/src"
	cgroupRoot = "/sys/fs/cgroup"
	tmpDisk    = "/dev/vda"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "vmtest: this is the init of a QEMU guest; scripts/vmtest.sh boots it")
		os.Exit(2)
	}
	passed, failed, err := guest()
	if err != nil {
		fmt.Printf("vmtest: guest set-up: %v\n", err)
		failed++
	}
	// The closing line the host script reads.
	fmt.Printf("vmtest: %d passed, %d failed\n", passed, failed)
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

// guest sets the machine up and runs every step of the plan, counting the
// steps that passed and failed.
func guest() (passed, failed int, err error) {
	for _, m := range []struct{ src, dst, fstype string }{
		{"dev", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sys", "/sys", "sysfs"},
	} {
		if err := mount(m.src, m.dst, m.fstype, 0, ""); err != nil {
			return 0, 0, err
		}
	}
	if err := loadModules(modulesDir); err != nil {
		return 0, 0, err
	}
	if err := switchRoot(); err != nil {
		return 0, 0, err
	}
	if err := loopbackUp(); err != nil {
		return 0, 0, err
	}
	if err := tunForEveryone(); err != nil {
		return 0, 0, err
	}
	if err := checkPureV2(); err != nil {
		return 0, 0, err
	}
	boot, err := readCmdline()
	if err != nil {
		return 0, 0, err
	}
	if err := checkLandlock(boot["moat.landlock"]); err != nil {
		return 0, 0, err
	}
	name := boot["moat.plan"]
	if name == "" {
		name = "plan"
	}
	plan, err := readPlan(binDir + "/" + name)
	if err != nil {
		return 0, 0, err
	}
	for _, s := range plan {
		fmt.Printf("vmtest: === step %s\n", s.name)
		start := time.Now()
		if err := s.run(); err != nil {
			fmt.Printf("vmtest: --- FAIL step %s (%.1fs): %v\n", s.name, time.Since(start).Seconds(), err)
			failed++
			continue
		}
		fmt.Printf("vmtest: --- ok step %s (%.1fs)\n", s.name, time.Since(start).Seconds())
		passed++
	}
	return passed, failed, nil
}

func mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", dst, err)
	}
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", fstype, dst, err)
	}
	return nil
}

// loadModules loads every module in dir. The host script copied the
// modules without their dependency table, so this loads in passes: a module
// whose dependencies are not loaded yet fails with ENOENT and is tried again
// in the next pass, until a pass makes no progress.
func loadModules(dir string) error {
	files, err := filepath.Glob(dir + "/*.ko")
	if err != nil {
		return err
	}
	for len(files) > 0 {
		var left []string
		var lastErr error
		for _, f := range files {
			err := finitModule(f)
			if err == nil || errors.Is(err, unix.EEXIST) {
				continue
			}
			left, lastErr = append(left, f), fmt.Errorf("load %s: %w", filepath.Base(f), err)
		}
		if len(left) == len(files) {
			return lastErr
		}
		files = left
	}
	return nil
}

func finitModule(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.FinitModule(int(f.Fd()), "", 0)
}

// switchRoot makes the host's root, read-only over 9p, the guest's root,
// with the guest's own /dev, /proc, /sys, cgroup2, /tmp and /run, and the
// shares of the test binaries and of the source tree beneath /mnt (a tmpfs:
// the host's /mnt is read-only here). The initramfs cannot stay the root:
// pivot_root(2), which moat's init calls, refuses the initial rootfs.
func switchRoot() error {
	// A driver probes its device after the module is in: wait for it.
	for i := 0; !exists(tmpDisk); i++ {
		if i == 100 {
			return fmt.Errorf("%s did not appear", tmpDisk)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ninep := "trans=virtio,version=9p2000.L,msize=512000,cache=loose"
	if err := mount("host", newRoot, "9p", unix.MS_RDONLY, ninep); err != nil {
		return err
	}
	for _, d := range []string{"/dev", "/proc", "/sys"} {
		if err := unix.Mount(d, newRoot+d, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s: %w", d, err)
		}
	}
	for _, m := range []struct{ src, dst, fstype, data string }{
		{"cgroup2", newRoot + cgroupRoot, "cgroup2", ""},
		{newRoot + tmpDisk, newRoot + "/tmp", "ext4", ""}, // /dev has moved
		{"run", newRoot + "/run", "tmpfs", "mode=755"},
		{"devpts", newRoot + "/dev/pts", "devpts", "newinstance,ptmxmode=0666"},
		{"shm", newRoot + "/dev/shm", "tmpfs", "mode=1777"},
		{"mnt", newRoot + "/mnt", "tmpfs", "mode=755"},
		{"bin", newRoot + binDir, "9p", ninep},
		{"src", newRoot + srcDir, "9p", ninep},
	} {
		if err := mount(m.src, m.dst, m.fstype, 0, m.data); err != nil {
			return err
		}
	}
	// Sticky, as on any machine: os.Chmod takes the sticky bit as
	// os.ModeSticky, and an octal 01000 is dropped.
	if err := os.Chmod(newRoot+"/tmp", 0o777|os.ModeSticky); err != nil {
		return err
	}
	if err := unix.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move new root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	return unix.Chdir("/")
}

// checkPureV2 makes sure the guest is what it is for: no v1 hierarchy
// holds memory, pids or cpu, and the unified one offers all three.
func checkPureV2() error {
	b, err := os.ReadFile(cgroupRoot + "/cgroup.controllers")
	if err != nil {
		return err
	}
	have := strings.Fields(string(b))
	for _, ctl := range []string{"memory", "pids", "cpu"} {
		if !slices.Contains(have, ctl) {
			return fmt.Errorf("cgroup2 root lacks %s (controllers: %s)", ctl, b)
		}
	}
	fmt.Printf("vmtest: kernel %s, cgroup2 only, controllers: %s", uname(), b)
	return nil
}

// readCmdline returns the kernel command line's key=value words. The host
// script passes moat.plan (the plan file beneath binDir, default "plan")
// and moat.landlock.
func readCmdline() (map[string]string, error) {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, w := range strings.Fields(string(b)) {
		if k, v, ok := strings.Cut(w, "="); ok {
			out[k] = v
		}
	}
	return out, nil
}

// checkLandlock makes sure a boot meant to run without Landlock (the host
// script leaves it out of lsm=, want "absent") has none: otherwise its
// steps would test the usual path again and prove nothing. It prints the
// ABI either way.
func checkLandlock(want string) error {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case want == "absent" && errno == 0:
		return fmt.Errorf("this boot is to run without Landlock, but the kernel offers ABI %d (is landlock still in lsm=?)", abi)
	case errno != 0:
		fmt.Printf("vmtest: no Landlock (landlock_create_ruleset: %v)\n", errno)
	default:
		fmt.Printf("vmtest: Landlock ABI %d\n", abi)
	}
	return nil
}

// tunForEveryone makes the TUN clone device mode 0666, as the udev rules
// of the common distributions do, so that the user's steps test
// transparent egress as an ordinary user gets it. devtmpfs makes the node
// a moment after the module is in.
func tunForEveryone() error {
	const tun = "/dev/net/tun"
	for i := 0; !exists(tun); i++ {
		if i == 100 {
			return fmt.Errorf("%s did not appear", tun)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return os.Chmod(tun, 0o666)
}

// loopbackUp brings lo up, as the host's is: tests serve on 127.0.0.1.
func loopbackUp() error {
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(sock)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(sock, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(sock, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func uname() string {
	var u unix.Utsname
	unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}

// A step runs one test binary with its arguments, as a user, in a cgroup.
//
// The plan file has one step a line, fields separated by spaces:
//
//	NAME UID CGROUP DIR BINARY ARGS...
//
// UID is 0 or a user id; CGROUP is "-" (the root cgroup, where init is),
// "delegated": a fresh cgroup owned by that user, with every controller
// available to it, as systemd's Delegate=yes gives a user's scope, or
// "session": a fresh cgroup that another process shares, as a login
// session's scope holds the shell moat is started from. DIR is
// the package directory beneath the source tree (go test runs a package's
// tests there), BINARY a file beneath binDir.
type step struct {
	name   string
	uid    int
	cgroup string
	dir    string
	argv   []string
}

func readPlan(file string) ([]step, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var plan []step
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) < 5 {
			return nil, fmt.Errorf("%s:%d: want NAME UID CGROUP DIR BINARY [ARGS]", file, n)
		}
		uid, err := strconv.Atoi(fields[1])
		if err != nil || (fields[2] != "-" && fields[2] != "delegated" && fields[2] != "session") {
			return nil, fmt.Errorf("%s:%d: bad UID or CGROUP", file, n)
		}
		argv := append([]string{binDir + "/" + fields[4]}, fields[5:]...)
		plan = append(plan, step{fields[0], uid, fields[2], filepath.Join(srcDir, fields[3]), argv})
	}
	return plan, sc.Err()
}

func (s step) run() error {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Dir = s.dir
	home := "/root"
	if s.uid != 0 {
		home = "/tmp/home-" + strconv.Itoa(s.uid)
		if err := os.MkdirAll(home, 0o700); err != nil {
			return err
		}
		if err := os.Chown(home, s.uid, s.uid); err != nil {
			return err
		}
	}
	cmd.Env = []string{
		// Without the go tool (/usr/local/go/bin): TestCommonToolsWork*'s
		// go subtests, which build a program in the sandbox, take ~80 s
		// each under emulation, and the host runs them.
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home, "TMPDIR=/tmp", "LANG=C.UTF-8",
		// Tests that would drive a program too slow under emulation (a
		// browser) skip, saying so.
		"MOAT_VMTEST_GUEST=1",
	}
	attr := &syscall.SysProcAttr{Setsid: true}
	if s.uid != 0 {
		attr.Credential = &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.uid)}
	}
	if s.cgroup != "-" {
		dir, err := delegate(s.name, s.uid)
		if err != nil {
			return err
		}
		defer unix.Rmdir(dir)
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		attr.UseCgroupFD, attr.CgroupFD = true, fd
		if s.cgroup == "session" {
			shell := exec.Command("/bin/sleep", "infinity")
			shell.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
			if err := shell.Start(); err != nil {
				return err
			}
			defer func() { shell.Process.Kill(); shell.Wait() }()
		}
	}
	cmd.SysProcAttr = attr
	out := &watchedWriter{w: os.Stdout}
	out.wrote()
	cmd.Stdout, cmd.Stderr = out, out
	// The output is a pipe now: a process a test leaked that holds it
	// must not keep the step (and the watchdog, whose pid is then
	// reaped) going after the test binary has exited.
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go watchdog(s.name, cmd.Process.Pid, out, done)
	return cmd.Wait()
}

// stepQuiet is how long a step may print nothing before the watchdog takes
// it for stuck: less than the host's MOAT_VMTEST_STALL default, so that a
// test that hangs fails with its goroutines printed, and the next step
// runs, instead of the whole guest being stopped and booted once more.
const stepQuiet = 180 * time.Second

// watchedWriter passes writes on, noting when the last one came.
type watchedWriter struct {
	w    *os.File
	last atomic.Int64 // unix nanoseconds
}

func (w *watchedWriter) wrote() { w.last.Store(time.Now().UnixNano()) }

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.wrote()
	return w.w.Write(p)
}

// watchdog sends SIGQUIT to the step's test binary, pid, once it has been
// quiet for stepQuiet (Go's runtime then prints every goroutine's stack
// and exits), and kills the step's process group if that is not the end
// of it.
func watchdog(name string, pid int, out *watchedWriter, done <-chan struct{}) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	var quit time.Time
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		quiet := time.Since(time.Unix(0, out.last.Load()))
		switch {
		case quit.IsZero() && quiet >= stepQuiet:
			fmt.Fprintf(out, "vmtest: step %s printed nothing for %s: SIGQUIT, for its goroutines' stacks\n", name, quiet.Round(time.Second))
			unix.Kill(pid, unix.SIGQUIT)
			quit = time.Now()
		case !quit.IsZero() && time.Since(quit) >= 30*time.Second:
			fmt.Fprintf(out, "vmtest: step %s still runs 30s after SIGQUIT: killing its process group\n", name)
			unix.Kill(-pid, unix.SIGKILL)
			quit = time.Now()
		}
	}
}

// delegate makes a cgroup the way systemd delegates one to a user: the
// directory and the files that matter for a subtree (cgroup.procs,
// cgroup.subtree_control, cgroup.threads) owned by that user (root: as
// they are), with every controller of the root available in it.
func delegate(name string, uid int) (string, error) {
	ctls, err := os.ReadFile(cgroupRoot + "/cgroup.controllers")
	if err != nil {
		return "", err
	}
	for _, ctl := range strings.Fields(string(ctls)) {
		if err := os.WriteFile(cgroupRoot+"/cgroup.subtree_control", []byte("+"+ctl), 0); err != nil {
			return "", fmt.Errorf("enable %s: %w", ctl, err)
		}
	}
	dir := cgroupRoot + "/vmtest-" + name
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range []string{"", "/cgroup.procs", "/cgroup.subtree_control", "/cgroup.threads"} {
		if err := os.Chown(dir+f, uid, uid); err != nil {
			return "", err
		}
	}
	return dir, nil
}
