package gvisor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/moatbox/moat/internal/cgroup"
)

// A gvisor container leaves things on the host that die with nothing:
// its directory (the bundle, runsc's state with the network namespace
// runsc pins there by a bind mount, an overlay workspace's mounts) and
// the cgroup of its limits. moat removes them when a run or session
// ends; a moat that is killed outright (SIGKILL) cannot. So the first
// container of a moat process starts a reaper: moat's own binary
// (reapArg0), in a session of its own (a terminal's or a process group's
// signal does not reach it), not moat's child, outside every sandbox,
// holding the read end of a pipe whose write end only moat holds. When
// moat's process ends, however it ends, the pipe reads end-of-file, and
// the reaper removes the directories of that moat's containers still
// there (the sandbox died with runsc, which has moat's death signal),
// then exits. A moat that ended cleanly left nothing, so its reaper
// exits at once.
//
// The reaper learns where to look from moat over the pipe: each line a
// JSON reapWatch, sent before the first container made in a temporary
// directory. The containers there are the directories named by moat's
// pid (prepare), so one made a moment before moat died is found too; the
// cgroup's directories are written into the container's directory
// (cgroupFile) as soon as the cgroup exists. If the reaper itself is
// killed with moat, the next gvisor run's sweep removes what is left.

// reapArg0 names moat's own binary started as the reaper.
const reapArg0 = "moat-gvisor-reap"

// cgroupFile, in a container's directory, lists its cgroup's directories
// (a JSON array).
const cgroupFile = "cgroup"

// reapWatch tells the reaper about a temporary directory moat makes
// containers in, and the runsc that deletes what runs there.
type reapWatch struct {
	Tmp   string `json:"tmp"`
	Runsc string `json:"runsc"`
}

// reaper is this process's reaper, started at its first container.
var reaper struct {
	mu      sync.Mutex
	w       *os.File    // the pipe's write end; nil until started
	watched []reapWatch // what the reaper was told, sent again to a new one
	// starting is closed once the latest start has ended, well or not.
	starting chan struct{}
}

// watchForReaper makes sure this process's reaper runs, or is being
// started, and knows about containers made in tmp with runsc. The start
// (two starts of moat's binary) goes on in the background, beside the
// container's: the pipe exists at once and holds what moat sends, and
// the reaper inherits its read end at the first fork, so a moat that
// dies after that is cleaned up after. A start that fails closes the
// read end, so the next container's write fails and starts another.
// The func it returns waits until the start has ended: a run calls it
// before it returns, so that no process of moat's making is left behind.
func watchForReaper(tmp, runsc string) (wait func(), err error) {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	rw := reapWatch{Tmp: tmp, Runsc: runsc}
	if !slices.Contains(reaper.watched, rw) {
		reaper.watched = append(reaper.watched, rw)
	}
	if reaper.w != nil {
		// Sent for every container, known or not: a reaper that was
		// killed meanwhile shows here (EPIPE), and another is started.
		if err := sendWatch(reaper.w, rw); err == nil {
			return waitStart(reaper.starting), nil
		}
		reaper.w.Close()
		reaper.w = nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the reaper: %w", err)
	}
	for _, rw := range reaper.watched {
		if err := sendWatch(w, rw); err != nil {
			r.Close()
			w.Close()
			return nil, fmt.Errorf("start the reaper: %w", err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A failure shows at the next container, whose write fails.
		_ = startReaper(r)
		r.Close()
	}()
	reaper.w, reaper.starting = w, done
	return waitStart(done), nil
}

func waitStart(done chan struct{}) func() { return func() { <-done } }

func sendWatch(w *os.File, rw reapWatch) error {
	line, err := json.Marshal(rw)
	if err != nil {
		return err
	}
	_, err = w.Write(append(line, '\n'))
	return err
}

// startReaper starts the reaper with r, the pipe's read end. It is
// started through a process that starts it and exits at once, so that it
// is not moat's child: a library caller that waits for its children, or
// counts them, finds none of moat's left after a run. The reaper's
// standard streams are /dev/null: it must not keep a caller's pipe open
// (`out=$(moat run ...)` waits for every writer), nor a directory busy
// (it works in /).
func startReaper(r *os.File) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, detachFlag, strconv.Itoa(os.Getpid()))
	cmd.Args[0] = reapArg0
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// detachFlag makes the reaper's first process start the reaper proper
// (itself again, without the flag) and exit.
const detachFlag = "--detach"

// reap is the reaper's main: moat's pid as its argument, the pipe on
// fd 3. It returns once it has removed what that moat left.
func reap(args []string) int {
	// Whatever ends moat's process group or session must not end this
	// one before moat's end is seen; a service manager's SIGKILL still
	// does, and then the next run's sweep cleans up.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	if len(args) == 2 && args[0] == detachFlag {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cmd := exec.Command(self, args[1])
		cmd.Args[0] = reapArg0
		cmd.Dir = "/"
		cmd.ExtraFiles = []*os.File{os.NewFile(3, "moat")}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	if len(args) != 1 {
		return 2
	}
	pid, err := strconv.Atoi(args[0])
	if err != nil || pid <= 0 {
		return 2
	}
	var watched []reapWatch
	in := bufio.NewScanner(os.NewFile(3, "moat"))
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		var rw reapWatch
		if json.Unmarshal(in.Bytes(), &rw) == nil && filepath.IsAbs(rw.Tmp) && !slices.Contains(watched, rw) {
			watched = append(watched, rw)
		}
	}
	// End of file: every copy of the write end is closed, so moat's
	// process has ended (only moat holds it; it is close-on-exec).
	for _, rw := range watched {
		dirs, _ := filepath.Glob(filepath.Join(rw.Tmp, fmt.Sprintf("moat-gvisor-%d-*", pid)))
		for _, d := range dirs {
			reapDir(d, rw.Runsc)
		}
	}
	return 0
}

// reapDir removes what a container whose moat is gone left: the
// container, if runsc's state says it may live (runsc delete kills its
// sandbox), the directory with its mounts, and its cgroup. Only a
// directory of this user's is touched (ownRunDir).
func reapDir(d, runsc string) {
	if !ownRunDir(d) {
		return
	}
	state := filepath.Join(d, "state")
	entries, _ := os.ReadDir(state)
	for _, e := range entries {
		// runsc keeps a container's state as ID_sandbox:ID.state.
		if _, name, ok := strings.Cut(e.Name(), "_sandbox:"); ok && runsc != "" {
			id := strings.TrimSuffix(name, ".state")
			exec.Command(runsc, "--root", state, "--log", os.DevNull, "delete", "--force", id).Run()
		}
	}
	var cg []string
	if b, err := os.ReadFile(filepath.Join(d, cgroupFile)); err == nil {
		json.Unmarshal(b, &cg)
	}
	removeRunDir(d)
	if len(cg) > 0 {
		// Nobody is left to tell of a failure: the next run's sweep
		// of empty cgroups is the fallback.
		cgroup.Reclaim("moat-", cg)
	}
}

// ownRunDir says whether d can be a container directory this user made
// (prepare): a directory, not a link, of this user, that nobody else may
// write. The temporary directory is shared: anyone can make a directory by
// that name there, whose cgroup file names someone else's cgroup, or whose
// state leads to someone else's mounts.
func ownRunDir(d string) bool {
	var st syscall.Stat_t
	if err := syscall.Lstat(d, &st); err != nil {
		return false
	}
	return st.Mode&syscall.S_IFMT == syscall.S_IFDIR && int(st.Uid) == os.Geteuid() && st.Mode&0o022 == 0
}

// writeCgroupFile records the cgroup's directories in the container's
// directory for reapDir.
func writeCgroupFile(dir string, cg *cgroup.Cgroup) error {
	b, err := json.Marshal(cg.Dirs())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, cgroupFile), b, 0o600)
}
