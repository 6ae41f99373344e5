//go:build linux

// Command timeit is the clock and memory gauge of bench/startup.sh.
//
//	timeit [-n N] [-warmup W] -- CMD [ARGS...]
//	    runs CMD W times untimed, then N times, each timed on its own with
//	    the monotonic clock from just before fork to just after the child
//	    is reaped, and prints one line: "MEDIAN P90 MEAN MIN" in ms.
//	timeit -raw [-n N] [-warmup W] -- CMD [ARGS...]
//	    the same runs, but prints each run's time (ms) on a line of its own,
//	    so that runs made in several rounds can be pooled.
//	timeit -stats FILE
//	    reads such times (one per line) and prints "MEDIAN P90 MEAN MIN".
//	timeit -mem -- CMD [ARGS...]
//	    runs CMD once, traced with ptrace, and reports the peak RSS of each
//	    process of the tree, read from /proc/PID/status (VmHWM) when the
//	    process stops at its exit (PTRACE_EVENT_EXIT), before its memory is
//	    released. It prints "key=value" lines (KiB) described below.
//
// Why ptrace for memory: the rusage that wait4 returns for a child is
// RUSAGE_BOTH in the kernel, so its ru_maxrss is the maximum over the child
// AND every descendant it reaped; getrusage(RUSAGE_CHILDREN) is the same
// maximum. Neither can tell the moat host process from its init stage.
// Both are still printed as a cross-check.
//
// CMD is executed directly (no shell), with this process's environment and
// working directory, stdin from /dev/null, and stdout and stderr to a
// temporary file that is shown if CMD fails. Any run that exits non-zero
// makes timeit fail.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moatbox/moat/bench/internal/stats"
)

func main() {
	n := flag.Int("n", 200, "timed runs")
	warmup := flag.Int("warmup", 5, "untimed runs before the timed ones")
	mem := flag.Bool("mem", false, "run once under ptrace and report peak RSS per process")
	raw := flag.Bool("raw", false, "print each run's time (ms) instead of the summary")
	stats := flag.String("stats", "", "summarise the times (ms, one per line) in `FILE`")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: timeit [-n N] [-warmup W] [-raw | -mem] -- CMD [ARGS...]\n       timeit -stats FILE")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *stats != "" {
		d, err := readSamples(*stats)
		if err != nil {
			fatal(err)
		}
		summary(d)
		return
	}
	args := flag.Args()
	if len(args) == 0 || *n < 1 || *warmup < 0 {
		flag.Usage()
		os.Exit(2)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fatal(err)
	}
	out, err := os.CreateTemp("", "timeit-out-*")
	if err != nil {
		fatal(err)
	}
	os.Remove(out.Name())
	defer out.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		fatal(err)
	}
	files := []uintptr{devnull.Fd(), out.Fd(), out.Fd()}

	if *mem {
		if err := memRun(path, args, files); err != nil {
			fatal(withOutput(err, out))
		}
		return
	}

	for i := 0; i < *warmup; i++ {
		if _, err := timedRun(path, args, files, out); err != nil {
			fatal(withOutput(err, out))
		}
	}
	d := make([]float64, 0, *n)
	for i := 0; i < *n; i++ {
		t, err := timedRun(path, args, files, out)
		if err != nil {
			fatal(withOutput(err, out))
		}
		ms := float64(t.Nanoseconds()) / 1e6
		if *raw {
			fmt.Printf("%.4f\n", ms)
		}
		d = append(d, ms)
	}
	if !*raw {
		summary(d)
	}
}

// summary prints "MEDIAN P90 MEAN MIN" of the times d (ms).
func summary(d []float64) {
	fmt.Println(stats.Summary(d))
}

func readSamples(name string) ([]float64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var d []float64
	for _, f := range strings.Fields(string(b)) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		d = append(d, v)
	}
	if len(d) == 0 {
		return nil, fmt.Errorf("%s: no samples", name)
	}
	return d, nil
}

// timedRun forks, execs and reaps CMD once and returns the elapsed time.
// out, CMD's stdout and stderr, is emptied first (outside the timing).
func timedRun(path string, args []string, files []uintptr, out *os.File) (time.Duration, error) {
	if err := out.Truncate(0); err != nil {
		return 0, err
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: files}
	start := time.Now()
	pid, err := syscall.ForkExec(path, args, attr)
	if err != nil {
		return 0, err
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	el := time.Since(start)
	if err != nil {
		return 0, err
	}
	return el, exitErr(ws)
}

// proc is what the tracer learned about one process (thread group).
type proc struct {
	argv0 string
	hwm   int64 // KiB, max VmHWM seen
	// anon and file are RssAnon and RssFile (KiB) at the last sample:
	// at its exit stop, what it held then, private and mapped from
	// files (its binary's pages, shared with the page cache).
	anon, file int64
	exact      bool // seen at an exit stop
	execd      bool // it ran execve, so its memory is its own
}

// memRun runs CMD once under ptrace, stopping every process of the tree at
// its exit to read its peak RSS.
func memRun(path string, args []string, files []uintptr) error {
	// Every ptrace request must come from the thread that is the tracer.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{
		Env: os.Environ(), Files: files,
		Sys: &syscall.SysProcAttr{Ptrace: true},
	})
	if err != nil {
		return err
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, syscall.WALL, nil); err != nil {
		return err
	}
	if !ws.Stopped() {
		return fmt.Errorf("traced child did not stop at exec (status %#x)", uint32(ws))
	}
	const opts = syscall.PTRACE_O_TRACEEXIT | syscall.PTRACE_O_TRACECLONE |
		syscall.PTRACE_O_TRACEFORK | syscall.PTRACE_O_TRACEVFORK |
		syscall.PTRACE_O_TRACEEXEC | 0x100000 // PTRACE_O_EXITKILL
	if err := syscall.PtraceSetOptions(pid, opts); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		return fmt.Errorf("ptrace setoptions: %w", err)
	}
	if err := syscall.PtraceCont(pid, 0); err != nil {
		return err
	}

	procs := map[int]*proc{} // by tgid
	seen := map[int]bool{pid: true}
	var hostRusage syscall.Rusage
	var hostStatus syscall.WaitStatus
	hostDone := false

	// sample records the peak RSS of the process that task tid belongs
	// to. At an exit stop it is exact; sampling live processes at the
	// other stops is the fallback for a process killed by SIGKILL, which
	// may get no exit stop.
	sample := func(tid int, exact bool) {
		tgid, hwm, anon, file, ok := readStatus(tid)
		if !ok {
			return
		}
		p := procs[tgid]
		if p == nil {
			p = &proc{}
			procs[tgid] = p
		}
		if a := readArgv0(tgid); a != "" {
			p.argv0 = a
		}
		if hwm > p.hwm {
			p.hwm = hwm
		}
		p.anon, p.file = anon, file
		p.exact = p.exact || exact
	}

	for {
		var ru syscall.Rusage
		wpid, err := syscall.Wait4(-1, &ws, syscall.WALL, &ru)
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.ECHILD {
			break
		}
		if err != nil {
			return err
		}
		switch {
		case ws.Exited() || ws.Signaled():
			if wpid == pid {
				hostRusage, hostStatus, hostDone = ru, ws, true
			}
			continue
		case !ws.Stopped():
			continue
		}
		sig := ws.StopSignal()
		inject := 0
		switch {
		case sig == syscall.SIGTRAP && ws.TrapCause() == syscall.PTRACE_EVENT_EXIT:
			sample(wpid, true)
		case sig == syscall.SIGTRAP && ws.TrapCause() > 0:
			// fork, clone, exec: a chance to sample the live tree.
			for tgid := range procs {
				sample(tgid, false)
			}
			if ws.TrapCause() == syscall.PTRACE_EVENT_EXEC {
				sample(wpid, false)
				if tgid, _, _, _, ok := readStatus(wpid); ok && procs[tgid] != nil {
					procs[tgid].execd = true
				}
			}
		case sig == syscall.SIGSTOP && !seen[wpid]:
			// The stop of a newly auto-attached task.
		default:
			inject = int(sig)
		}
		seen[wpid] = true
		// The task may have been killed meanwhile; ESRCH is fine.
		syscall.PtraceCont(wpid, inject)
	}
	if !hostDone {
		return errors.New("lost the traced command's exit status")
	}
	var children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)

	hostTgid := pid
	hostArgv0 := ""
	if h := procs[hostTgid]; h != nil {
		hostArgv0 = h.argv0
	}
	// A child that never ran execve is a CLONE_VM probe (Go's pidfd
	// check) or a fork that died before exec: its memory is its parent's,
	// not a process of its own. A new argv[0] means an exec happened even
	// when its event was lost to a SIGKILL.
	own := func(p *proc) bool { return p.execd || p.argv0 != hostArgv0 }
	var hostKiB, hostAnon, hostFile, descKiB int64
	descName := "none"
	exact := true
	for tgid, p := range procs {
		if tgid == hostTgid {
			hostKiB, hostAnon, hostFile = p.hwm, p.anon, p.file
			exact = exact && p.exact
			continue
		}
		if !own(p) {
			continue
		}
		if p.hwm > descKiB {
			descKiB, descName = p.hwm, p.argv0
		}
	}
	var tree []string
	for tgid, p := range procs {
		mark := ""
		if !p.exact {
			mark = "~" // sampled while running, not at exit: a lower bound
		}
		role := "descendant"
		switch {
		case tgid == hostTgid:
			role = "host"
		case !own(p):
			role = "no-exec-child"
		}
		tree = append(tree, fmt.Sprintf("%s:%s=%s%d", role, p.argv0, mark, p.hwm))
	}
	slices.Sort(tree)
	fmt.Printf("host_kib=%d\n", hostKiB)
	fmt.Printf("host_exact=%t\n", exact)
	fmt.Printf("host_anon_kib=%d\n", hostAnon)
	fmt.Printf("host_file_kib=%d\n", hostFile)
	fmt.Printf("descendants_max_kib=%d\n", descKiB)
	fmt.Printf("descendants_max_name=%s\n", descName)
	fmt.Printf("tree=%s\n", strings.Join(tree, ","))
	fmt.Printf("wait4_maxrss_kib=%d\n", hostRusage.Maxrss)
	fmt.Printf("rusage_children_kib=%d\n", children.Maxrss)
	return exitErr(hostStatus)
}

// readStatus returns the thread group id, VmHWM, RssAnon and RssFile
// (KiB) of a task.
func readStatus(tid int) (tgid int, hwmKiB, anonKiB, fileKiB int64, ok bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, 0, 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	haveHWM := false
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), ":")
		if !found {
			continue
		}
		v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
		switch k {
		case "Tgid":
			tgid, _ = strconv.Atoi(v)
		case "VmHWM":
			hwmKiB, _ = strconv.ParseInt(v, 10, 64)
			haveHWM = true
		case "RssAnon":
			anonKiB, _ = strconv.ParseInt(v, 10, 64)
		case "RssFile":
			fileKiB, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return tgid, hwmKiB, anonKiB, fileKiB, tgid > 0 && haveHWM
}

func readArgv0(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	a, _, _ := bytes.Cut(b, []byte{0})
	s := string(a)
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func exitErr(ws syscall.WaitStatus) error {
	switch {
	case ws.Exited() && ws.ExitStatus() == 0:
		return nil
	case ws.Exited():
		return fmt.Errorf("command exited with status %d", ws.ExitStatus())
	case ws.Signaled():
		return fmt.Errorf("command killed by signal %v", ws.Signal())
	}
	return fmt.Errorf("command ended with wait status %#x", uint32(ws))
}

// withOutput adds what the command printed to err.
func withOutput(err error, out *os.File) error {
	if _, serr := out.Seek(0, io.SeekStart); serr != nil {
		return err
	}
	b, _ := io.ReadAll(io.LimitReader(out, 4096))
	if len(bytes.TrimSpace(b)) == 0 {
		return err
	}
	return fmt.Errorf("%w; its output:\n%s", err, bytes.TrimSpace(b))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "timeit:", err)
	os.Exit(1)
}
