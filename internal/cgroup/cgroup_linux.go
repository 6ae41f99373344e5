//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// How long Kill waits for the group to empty, Destroy retries a busy rmdir,
// and a freeze may take before processes are signalled anyway.
const (
	killTimeout   = 5 * time.Second
	rmdirTimeout  = time.Second
	freezeTimeout = 100 * time.Millisecond
)

// sweepMinAge keeps Sweep away from a cgroup that a concurrent New has just
// created and not yet filled with Add.
const sweepMinAge = 10 * time.Second

// disableKillFile makes New ignore cgroup.kill, so tests can exercise the
// freezer fallback on a kernel that has cgroup.kill.
var disableKillFile = false

// discover reads where the caller's cgroups are. Nothing is cached: the two
// files are small, and a long-lived caller may be moved between cgroups.
func discover() (layout, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return layout{}, fmt.Errorf("cgroup: %w", err)
	}
	pc, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return layout{}, fmt.Errorf("cgroup: %w", err)
	}
	pcg := parseProcCgroup(pc)
	// This process's leaf (see v2Parent) stands for the cgroup it was
	// made in: runs go beside it, and what a further run could have is
	// what that cgroup offers. The leaf may be left and removed by another
	// run at any time, so a reading that names it is taken as its parent,
	// whether or not the leaf is still there.
	if path.Base(pcg.v2) == leafName() {
		pcg.v2 = path.Dir(pcg.v2)
	}
	return resolve(parseMountInfo(mi), pcg), nil
}

// Probe reports what this caller could do with cgroups. It creates nothing:
// it reads the mounts, the caller's cgroup and (on v2) the controllers its
// cgroup offers, and checks write access with faccessat(2).
func Probe() Info {
	info := Info{Version: "none", Usable: map[string]bool{}, Why: map[string]string{}}
	l, err := discover()
	if err != nil {
		for _, ctl := range []string{"memory", "pids", "cpu"} {
			info.Usable[ctl], info.Why[ctl] = false, err.Error()
		}
		return info
	}
	info.Version = l.version()
	var v2 *v2State
	for _, ctl := range []string{"memory", "pids", "cpu"} {
		why := ""
		if dir, ok := l.v1[ctl]; ok {
			why = notWritable(dir)
		} else if w, ok := l.v1Why[ctl]; ok {
			why = w
		} else {
			if v2 == nil && l.v2 != "" {
				v2 = readV2State(l.v2)
			}
			why = l.whyNotV2(ctl, v2)
		}
		info.Usable[ctl] = why == ""
		if why != "" {
			info.Why[ctl] = why
		}
	}
	if !info.Usable["memory"] || !info.Usable["pids"] || !info.Usable["cpu"] {
		info.HowTo = l.howTo()
	}
	info.Kill = l.v2 != "" && notWritable(l.v2) == "" && killSupported(l)
	return info
}

// howTo says how this caller can get the cgroups it lacks on this host:
// the commands, with this host's paths and the caller's name.
func (l layout) howTo() string {
	uid := os.Geteuid()
	name := strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	var v1 []string
	for _, ctl := range []string{"memory", "pids", "cpu", "cpuacct"} {
		if dir, ok := l.v1[ctl]; ok && !slices.Contains(v1, dir) && notWritable(dir) != "" {
			v1 = append(v1, dir)
		}
	}
	if len(v1) > 0 {
		return fmt.Sprintf("as root, make %[1]s a cgroup in each v1 hierarchy: "+
			"for d in %[2]s; do mkdir $d/moatuser-%[1]s && chown -R %[1]s $d/moatuser-%[1]s; done; "+
			"then, as %[1]s, move your shell into them (for each: echo $$ > DIR/moatuser-%[1]s/cgroup.procs) and run moat from it; "+
			"moat makes each run's cgroup beneath them",
			name, strings.Join(v1, " "))
	}
	if l.v2 == "" || l.v2Top == "" {
		return "no cgroup v2 hierarchy of the whole host is mounted here; ask the host's administrator for a delegated cgroup"
	}
	manager := path.Join(l.v2Top, "user.slice", fmt.Sprintf("user-%d.slice", uid), fmt.Sprintf("user@%d.service", uid))
	runInScope := "systemd-run --user --scope -p Delegate=yes moat run ..."
	if strings.HasPrefix(l.v2+"/", manager+"/") || exists(manager) {
		return fmt.Sprintf("start moat in a delegated scope of your systemd user manager (%s): %s "+
			"(moat cannot move itself there: the kernel moves a process between cgroups only for a writer of their common ancestor, "+
			"and systemd-run has systemd do it)", path.Base(manager), runInScope)
	}
	d := path.Join(l.v2Top, "moatuser-"+name)
	return fmt.Sprintf("no systemd user manager runs for %[1]s: as root, either `loginctl enable-linger %[1]s` starts one "+
		"(then, from a new login, %[2]s), or delegate a cgroup by hand: "+
		"mkdir %[3]s && echo '+memory +pids +cpu' > %[4]s/cgroup.subtree_control && "+
		"chown %[1]s %[3]s %[3]s/cgroup.procs %[3]s/cgroup.subtree_control %[3]s/cgroup.threads && "+
		"mkdir %[3]s/shell && echo PID > %[3]s/shell/cgroup.procs, PID being %[1]s's shell; "+
		"moat started from that shell makes its runs in %[3]s",
		name, runInScope, d, l.v2Top)
}

// v2State is what Probe reads of the caller's cgroup v2 directory.
type v2State struct {
	controllers, subtree []string
	populated            bool
	onlySelf             bool // the only process in it is this one
}

func readV2State(dir string) *v2State {
	var s v2State
	if b, err := os.ReadFile(dir + "/cgroup.controllers"); err == nil {
		s.controllers = strings.Fields(string(b))
	}
	if b, err := os.ReadFile(dir + "/cgroup.subtree_control"); err == nil {
		s.subtree = strings.Fields(string(b))
	}
	if pids, err := readPids(dir + "/cgroup.procs"); err == nil {
		s.populated = len(pids) > 0
		s.onlySelf = len(pids) == 1 && pids[0] == os.Getpid()
	}
	return &s
}

// whyNotV2 says why controller ctl cannot be used on the unified hierarchy,
// "" when it can.
func (l layout) whyNotV2(ctl string, s *v2State) string {
	why := l.whyNotOwnV2(ctl, s)
	if why != "" && l.v2 != "" && os.Geteuid() != 0 && delegatedAncestor(l, []string{ctl}) != "" {
		return ""
	}
	return why
}

// whyNotOwnV2 says why controller ctl cannot be used for children of the
// caller's own cgroup, or of a leaf New would move it to; "" when it can.
func (l layout) whyNotOwnV2(ctl string, s *v2State) string {
	if l.v2 == "" {
		if l.v2Mounted {
			return "cgroup2 is mounted but does not show this process's cgroup"
		}
		return fmt.Sprintf("no mounted cgroup hierarchy has the %s controller", ctl)
	}
	if !slices.Contains(s.controllers, ctl) {
		return fmt.Sprintf("the %s controller is not listed in %s/cgroup.controllers", ctl, l.v2)
	}
	if why := notWritable(l.v2); why != "" {
		return why
	}
	if slices.Contains(s.subtree, ctl) {
		return ""
	}
	if why := notWritable(l.v2 + "/cgroup.subtree_control"); why != "" {
		return why
	}
	// A populated cgroup cannot enable controllers for children (the
	// no-internal-process rule); New works around it when moat is alone in
	// it, or for root (see v2Parent).
	if !l.exempt() && s.populated && !s.onlySelf && (os.Geteuid() != 0 || l.v2Top == "" || l.v2Top == l.v2) {
		return fmt.Sprintf("%s holds other processes than moat, so cgroup v2 cannot enable %s for its children (no-internal-process rule); start moat in a cgroup of its own, e.g. with systemd-run --user --scope -p Delegate=yes moat run CMD", l.v2, ctl)
	}
	return ""
}

// notWritable says why the effective ids cannot write p, "" when they can.
func notWritable(p string) string {
	err := unix.Faccessat(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Sprintf("%s is not writable by uid %d (no delegation)", p, os.Geteuid())
	case errors.Is(err, unix.EROFS):
		return fmt.Sprintf("%s is on a read-only mount", p)
	}
	return fmt.Sprintf("%s: %v", p, err)
}

// killSupported says whether a child of the caller's v2 cgroup would have
// cgroup.kill. The root cgroup has no such file, so there the kernel version
// (5.14 added it) decides.
func killSupported(l layout) bool {
	if !l.exempt() {
		return exists(l.v2 + "/cgroup.kill")
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	return major > 5 || major == 5 && minor >= 14
}

// Cgroup is one run's cgroup: a directory per hierarchy, all with the same
// name beneath the creator's own cgroups. Its methods are safe for
// concurrent use. It must be released with Destroy.
type Cgroup struct {
	mu        sync.Mutex
	dirs      []string // every directory New created, the unified one first
	unified   string   // the directory on the unified hierarchy, "" if none
	hasKill   bool     // unified has cgroup.kill
	fd        int      // O_PATH fd of unified when it holds every controller, else -1
	destroyed bool
	// shared is a parent New created for runs to share (the root's moat
	// directory); Destroy removes it when no other run uses it.
	shared string
	// inLeaf: New moved this process into a leaf of its cgroup to make
	// room for c (see makeRoom); Destroy undoes that with the last such run.
	inLeaf bool

	// The directory holding each controller's files, "" when absent.
	mem, pids, cpu, cpuacct, freezer string
	memV2, cpuV2, freezerV2          bool // the directory is on the unified hierarchy
}

// New creates the cgroup name (a single path element, unique among the
// caller's runs) and applies lim. It creates a directory on every v1
// hierarchy it uses (memory, pids and cpuacct always, for stats; cpu only
// for a CPU quota; freezer only when there is no cgroup.kill) and one on the
// unified hierarchy when it is mounted. A requested limit that cannot be
// applied is a *LimitError naming the controller and the file; New then
// removes whatever it created.
func New(name string, lim Limits) (*Cgroup, error) {
	if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\x00") {
		return nil, fmt.Errorf("cgroup: invalid name %q", name)
	}
	if err := lim.validate(); err != nil {
		return nil, err
	}
	l, err := discover()
	if err != nil {
		return nil, err
	}
	c := &Cgroup{fd: -1}
	err = c.create(l, name, lim)
	if err == nil {
		err = c.setLimits(lim)
	}
	if err != nil {
		if c.fd >= 0 {
			unix.Close(c.fd)
		}
		return nil, errors.Join(err, c.release())
	}
	return c, nil
}

// NewBare creates the cgroup name for a run that sets no cgroup limit: one
// directory on the unified hierarchy, with no controller enabled for it and
// nothing written to the caller's cgroup. It exists to keep such a run out of
// the caller's own cgroup where that matters: the limits' controllers are on
// cgroup v2 (not a v1 or hybrid host) and the caller's cgroup is not the
// hierarchy's root. There a run with limits started while this one is in
// progress may need the caller's cgroup to hold the caller alone, to move
// the caller into a leaf (see v2Parent); a process of this run in that
// cgroup would make it refuse, and one in the leaf would keep the leaf from
// being removed. Like a run with limits, the bare one is made beside the
// leaf while the caller sits in it.
//
// Elsewhere NewBare returns nil and no error: where the caller shares its
// cgroup with other processes (no leaf is possible there, and the tree may
// be someone else's), where it may not create a cgroup (no delegation, a
// read-only cgroupfs), beneath a threaded cgroup. The run then stays in
// the caller's cgroup, where a run without limits always may be. The
// cgroup it returns has an fd for CLONE_INTO_CGROUP ([Cgroup.UnifiedFD]),
// cgroup.kill where the kernel has it, the CPU time of cpu.stat, and must
// be released with Destroy.
func NewBare(name string) (*Cgroup, error) {
	if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\x00") {
		return nil, fmt.Errorf("cgroup: invalid name %q", name)
	}
	l, err := discover()
	if err != nil {
		return nil, err
	}
	onV2 := len(testV2Controllers) > 0
	for _, ctl := range []string{"memory", "pids", "cpu"} {
		if _, ok := l.v1[ctl]; !ok {
			onV2 = true
		}
	}
	if !onV2 || l.v2 == "" || l.exempt() {
		return nil, nil
	}
	dir, err := bareDir(l, name)
	if dir == "" || err != nil {
		return nil, err
	}
	// Beneath a threaded cgroup a new one is "domain invalid" and takes no
	// process: the run stays where it would have been without it.
	if b, err := os.ReadFile(dir + "/cgroup.type"); err != nil || strings.TrimSpace(string(b)) != "domain" {
		unix.Rmdir(dir)
		return nil, nil
	}
	c := &Cgroup{fd: -1, dirs: []string{dir}, unified: dir, hasKill: !disableKillFile && exists(dir+"/cgroup.kill")}
	if !c.hasKill && exists(dir+"/cgroup.freeze") {
		c.freezer, c.freezerV2 = dir, true
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		err = fmt.Errorf("cgroup: open %s: %w", dir, err)
		return nil, errors.Join(err, c.removeDirs())
	}
	c.fd = fd
	return c, nil
}

func (c *Cgroup) create(l layout, name string, lim Limits) error {
	required := map[string]bool{"memory": lim.MemoryBytes > 0, "pids": lim.Pids > 0, "cpu": lim.CPUs > 0}
	// Controllers not on v1 must come from the unified hierarchy. On v2
	// cpu.stat exists without the cpu controller, so cpu is enabled only
	// for a quota.
	var onV2 []string
	for _, ctl := range testV2Controllers {
		required[ctl] = true
		onV2 = append(onV2, ctl)
	}
	for _, ctl := range []string{"memory", "pids", "cpu"} {
		if _, ok := l.v1[ctl]; ok || (ctl == "cpu" && !required[ctl]) {
			continue
		}
		switch why, ok := l.v1Why[ctl]; {
		case ok && required[ctl]:
			return &LimitError{Controller: ctl, Err: fmt.Errorf("%w: %s", ErrNoController, why)}
		case l.v2 != "":
			onV2 = append(onV2, ctl)
		case required[ctl]:
			return &LimitError{Controller: ctl, Err: ErrNoController}
		}
	}

	// The unified directory comes first: it carries cgroup.kill, and Add
	// writes it first, so any process in one of c's directories is in it.
	if l.v2 != "" {
		var dir string
		var enabled []string
		var err error
		for try := 0; ; try++ {
			var parent string
			if parent, err = c.v2Parent(l, onV2, required); err != nil {
				return err
			}
			enabled, err = enableV2(parent, onV2, required, parent == l.v2 && l.crowded())
			if err == nil {
				dir = path.Join(parent, name)
				err = unix.Mkdir(dir, 0o755)
			}
			if err == nil && c.shared != "" {
				// Removed and made again in between, the shared parent
				// has none of the controllers enabled in it before.
				if err = hasControllers(dir, enabled); err != nil {
					unix.Rmdir(dir)
				}
			}
			// A shared parent may vanish under another moat process's
			// Destroy of its last run between creation and use (this
			// process's runs count their users, see sharedUsers): make
			// it again. Gone, its files fail with ENOENT, being removed
			// with ENODEV, and a controller enabled in it as it went
			// reads as missing; a failure that lasts is returned.
			if c.shared == "" || try == 3 || err == nil {
				break
			}
			c.leaveShared()
		}
		if err != nil && dir == "" {
			return err // enableV2 failed for a required controller
		}
		if err != nil {
			for _, ctl := range enabled {
				if required[ctl] {
					return &LimitError{Controller: ctl, Path: dir, Err: err}
				}
			}
			// On a hybrid host the unified directory only adds
			// cgroup.kill; without it Kill uses the freezer.
			if len(l.v1) == 0 || !optional(err) {
				return fmt.Errorf("cgroup: create %s: %w", dir, err)
			}
		} else {
			c.dirs = append(c.dirs, dir)
			c.unified = dir
			c.hasKill = !disableKillFile && exists(dir+"/cgroup.kill")
			for _, ctl := range enabled {
				switch ctl {
				case "memory":
					c.mem, c.memV2 = dir, true
				case "pids":
					c.pids = dir
				case "cpu":
					c.cpu, c.cpuV2 = dir, true
				}
			}
			if !c.hasKill && exists(dir+"/cgroup.freeze") {
				c.freezer, c.freezerV2 = dir, true
			}
		}
	}

	v1 := []string{"memory", "pids", "cpuacct"}
	if required["cpu"] {
		v1 = append(v1, "cpu")
	}
	if !c.hasKill {
		v1 = append(v1, "freezer")
	}
	for _, ctl := range v1 {
		parent, ok := l.v1[ctl]
		if !ok {
			continue
		}
		dir := path.Join(parent, name)
		// Co-mounted controllers (cpu,cpuacct) share one directory.
		if !slices.Contains(c.dirs, dir) {
			if err := unix.Mkdir(dir, 0o755); err != nil {
				if required[ctl] {
					return &LimitError{Controller: ctl, Path: dir, Err: err}
				}
				if !optional(err) {
					return fmt.Errorf("cgroup: create %s: %w", dir, err)
				}
				continue
			}
			c.dirs = append(c.dirs, dir)
		}
		switch ctl {
		case "memory":
			c.mem = dir
		case "pids":
			c.pids = dir
		case "cpu":
			c.cpu = dir
		case "cpuacct":
			c.cpuacct = dir
		case "freezer":
			c.freezer, c.freezerV2 = dir, false
		}
	}
	if len(c.dirs) == 0 {
		return fmt.Errorf("cgroup: no hierarchy lets uid %d create %s", os.Geteuid(), name)
	}
	if len(c.dirs) == 1 && c.unified != "" {
		fd, err := unix.Open(c.unified, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("cgroup: open %s: %w", c.unified, err)
		}
		c.fd = fd
	}
	return nil
}

// optional reports whether a failure to create a directory only needed for
// stats may be ignored: the caller lacks the permission, which Probe shows.
func optional(err error) bool {
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS)
}

// enableV2 enables the controllers ctls for the children of the caller's v2
// cgroup dir and returns those it could enable. A failure is an error only
// for a controller with a requested limit; the others only feed Stats.
//
// In a crowded dir (one holding processes, other than the hierarchy's
// root) only required controllers are enabled, and v2Parent has seen to it
// that there are none to enable there. Enabling one only for stats would
// fail for memory (the no-internal-process rule), but succeed for pids, a
// threaded controller: that makes dir a thread root, whose children are
// then invalid domains, and moving a process into the run's cgroup fails
// with EOPNOTSUPP, for this run and every later one made beside it.
func enableV2(dir string, ctls []string, required map[string]bool, crowded bool) ([]string, error) {
	if len(ctls) == 0 {
		return nil, nil
	}
	file := dir + "/cgroup.subtree_control"
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	have := strings.Fields(string(b))
	var enabled []string
	for _, ctl := range ctls {
		if !slices.Contains(have, ctl) {
			if crowded && !required[ctl] {
				continue
			}
			err := writeFile(file, "+"+ctl)
			if errors.Is(err, unix.EBUSY) {
				err = fmt.Errorf("%w: %s holds processes (cgroup v2's no-internal-process rule); start moat in a cgroup of its own, e.g. with systemd-run --user --scope -p Delegate=yes moat run CMD", err, dir)
			} else if errors.Is(err, unix.ENOENT) {
				err = fmt.Errorf("%w: not in %s/cgroup.controllers", ErrNoController, dir)
			}
			if err != nil {
				if required[ctl] {
					return nil, &LimitError{Controller: ctl, Path: file, Err: err}
				}
				continue
			}
		}
		enabled = append(enabled, ctl)
	}
	return enabled, nil
}

func (c *Cgroup) setLimits(lim Limits) error {
	set := func(ctl, file, val string, mayBeAbsent bool) error {
		err := writeFile(file, val)
		if err == nil || mayBeAbsent && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &LimitError{Controller: ctl, Path: file, Err: err}
	}
	var errs []error
	if lim.MemoryBytes > 0 {
		v := strconv.FormatInt(lim.MemoryBytes, 10)
		if c.memV2 {
			errs = append(errs, set("memory", c.mem+"/memory.max", v, false),
				set("memory", c.mem+"/memory.swap.max", "0", true))
		} else {
			// memsw (memory+swap) must not be below the memory limit:
			// write it second.
			errs = append(errs, set("memory", c.mem+"/memory.limit_in_bytes", v, false),
				set("memory", c.mem+"/memory.memsw.limit_in_bytes", v, true))
		}
	}
	if lim.Pids > 0 {
		errs = append(errs, set("pids", c.pids+"/pids.max", strconv.FormatInt(lim.Pids, 10), false))
	}
	if lim.CPUs > 0 {
		q := lim.cpuQuotaUsec()
		if c.cpuV2 {
			errs = append(errs, set("cpu", c.cpu+"/cpu.max", fmt.Sprintf("%d %d", q, cpuPeriodUsec), false))
		} else {
			errs = append(errs, set("cpu", c.cpu+"/cpu.cfs_period_us", strconv.Itoa(cpuPeriodUsec), false),
				set("cpu", c.cpu+"/cpu.cfs_quota_us", strconv.FormatInt(q, 10), false))
		}
	}
	return errors.Join(errs...)
}

// SetPids changes c's pids limit (pids.max) to n tasks, for a caller whose
// own tasks in c are not to count against the limit it was made with.
func (c *Cgroup) SetPids(n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed || c.pids == "" {
		return errors.New("cgroup: no pids limit to change")
	}
	if err := writeFile(c.pids+"/pids.max", strconv.FormatInt(n, 10)); err != nil {
		return &LimitError{Controller: "pids", Path: c.pids + "/pids.max", Err: err}
	}
	return nil
}

// Add moves the process pid (all its threads) into every directory of c.
// Processes pid forked before the call stay where they are: move a process
// before it runs the command.
func (c *Cgroup) Add(pid int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return errors.New("cgroup: add to a destroyed cgroup")
	}
	for _, d := range c.dirs {
		if err := writeFile(d+"/cgroup.procs", strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("cgroup: add pid %d to %s: %w", pid, d, err)
		}
	}
	return nil
}

// UnifiedFD returns an O_PATH directory fd of c's cgroup v2 directory, for
// starting a process straight inside it (clone3 CLONE_INTO_CGROUP,
// syscall.SysProcAttr.UseCgroupFD). It reports false when c also has v1
// directories (a hybrid or v1 host), which such a start would miss: use Add
// then. The fd belongs to c and is closed by Destroy.
func (c *Cgroup) UnifiedFD() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fd, c.fd >= 0
}

// Stats reads c's counters. A counter the host lacks is 0.
func (c *Cgroup) Stats() (Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s Stats
	if c.destroyed {
		return s, errors.New("cgroup: stats of a destroyed cgroup")
	}
	var errs []error
	read := func(file string) []byte {
		b, err := os.ReadFile(file)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cgroup: %w", err))
		}
		return b
	}
	readInt := func(file string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSpace(string(read(file))), 10, 64)
		return n
	}
	if c.mem != "" {
		if c.memV2 {
			s.MemoryPeak = readInt(c.mem + "/memory.peak")
			s.MemoryCurrent = readInt(c.mem + "/memory.current")
			ev := read(c.mem + "/memory.events")
			s.OOMKills, s.MemoryLimitHits = keyedValue(ev, "oom_kill"), keyedValue(ev, "max")
		} else {
			s.MemoryPeak = readInt(c.mem + "/memory.max_usage_in_bytes")
			s.MemoryCurrent = readInt(c.mem + "/memory.usage_in_bytes")
			s.OOMKills = keyedValue(read(c.mem+"/memory.oom_control"), "oom_kill")
			// A charge fails on memsw (memory+swap) or on memory,
			// never both; with swap accounting memsw fails first.
			s.MemoryLimitHits = readInt(c.mem+"/memory.failcnt") + readInt(c.mem+"/memory.memsw.failcnt")
		}
	}
	if c.pids != "" {
		s.PidsLimitHits = keyedValue(read(c.pids+"/pids.events"), "max")
		s.PidsCurrent = readInt(c.pids + "/pids.current")
	}
	if c.cpuacct != "" {
		s.CPUUsageNanos = readInt(c.cpuacct + "/cpuacct.usage")
	} else if c.unified != "" {
		s.CPUUsageNanos = keyedValue(read(c.unified+"/cpu.stat"), "usage_usec") * 1000
	}
	return s, errors.Join(errs...)
}

// Kill kills every process in c and waits until c is empty. It writes
// cgroup.kill when the kernel has it; otherwise it freezes the group (v1
// freezer or cgroup.freeze), SIGKILLs each process and thaws it, until no
// process is left. Killing a destroyed cgroup does nothing.
func (c *Cgroup) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	return c.kill()
}

func (c *Cgroup) kill() error {
	deadline := time.Now().Add(killTimeout)
	for delay := 50 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		pids, err := c.procs()
		if err != nil || len(pids) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: processes %v still in %s after %v", pids, c.dirs[0], killTimeout)
		}
		if c.hasKill {
			err = writeFile(c.unified+"/cgroup.kill", "1")
		} else {
			err = c.freezeAndSignal(pids)
		}
		if err != nil {
			return fmt.Errorf("cgroup: kill: %w", err)
		}
		time.Sleep(delay)
	}
}

// freezeAndSignal SIGKILLs every process in c. Frozen, they can neither fork
// nor exit (so no pid is reused before its signal lands); the signals take
// effect at the thaw.
func (c *Cgroup) freezeAndSignal(pids []int) error {
	if c.freezer != "" {
		if err := c.freeze(true); err != nil {
			return err
		}
		defer c.freeze(false)
		var err error
		if pids, err = c.procs(); err != nil {
			return err
		}
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && err != unix.ESRCH {
			return fmt.Errorf("signal %d: %w", pid, err)
		}
	}
	return nil
}

// freeze freezes or thaws c and waits briefly for a freeze to complete (a
// task in uninterruptible sleep can delay it; it is signalled anyway).
func (c *Cgroup) freeze(on bool) error {
	// v1: freezer.state is written FROZEN or THAWED and reads FREEZING
	// until done; v2: cgroup.freeze is written 1 or 0 and cgroup.events
	// says "frozen 1" when done.
	file, val, state, done := c.freezer+"/freezer.state", "THAWED", c.freezer+"/freezer.state", "FROZEN"
	if on {
		val = "FROZEN"
	}
	if c.freezerV2 {
		file, val, state, done = c.freezer+"/cgroup.freeze", "0", c.freezer+"/cgroup.events", "frozen 1"
		if on {
			val = "1"
		}
	}
	if err := writeFile(file, val); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for end := time.Now().Add(freezeTimeout); on && time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		if b, err := os.ReadFile(state); err != nil || strings.Contains(string(b), done) {
			break
		}
	}
	return nil
}

// procs lists the processes in any of c's directories that still exist.
func (c *Cgroup) procs() ([]int, error) {
	var pids []int
	for _, d := range c.dirs {
		in, err := readPids(d + "/cgroup.procs")
		if errors.Is(err, os.ErrNotExist) {
			continue // removed already (by Sweep or an earlier Destroy)
		}
		if err != nil {
			return nil, err
		}
		for _, pid := range in {
			if !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// Destroy kills every process in c and removes its directories. It may be
// called again after an error, and does nothing once it has succeeded.
func (c *Cgroup) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	err := c.kill()
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	if err = errors.Join(err, c.removeDirs()); err == nil {
		c.destroyed = true
		err = c.release()
	}
	return err
}

// release removes c's directories and undoes what New did to make room
// for them (see v2Parent).
func (c *Cgroup) release() error {
	err := c.removeDirs()
	c.leaveShared()
	if c.inLeaf {
		c.inLeaf = false
		err = errors.Join(err, leaveLeaf())
	}
	return err
}

// removeDirs removes c's directories, retrying briefly while the kernel
// still counts an exiting process in one (EBUSY). Missing ones are fine.
func (c *Cgroup) removeDirs() error {
	var errs []error
	for _, d := range c.dirs {
		if err := rmdir(d, rmdirTimeout); err != nil {
			errs = append(errs, fmt.Errorf("cgroup: remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

func rmdir(dir string, patience time.Duration) error {
	deadline := time.Now().Add(patience)
	for delay := 50 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		err := unix.Rmdir(dir)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err != unix.EBUSY || time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay)
	}
}

// Dirs lists c's directories, for a process that must remove them if
// c's creator dies before Destroy (Reclaim).
func (c *Cgroup) Dirs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.dirs)
}

// Reclaim kills what is left in the cgroup whose directories are dirs
// (from Dirs) and removes them, as Destroy would have: for a process
// watching a creator that died before Destroy. dirs are read from a
// record on disk, so each must be a clean absolute path whose last
// element starts with prefix (the name given New, as for Sweep) and a
// directory of a cgroup file system; otherwise nothing is done and the
// error says which. Missing ones are fine.
func Reclaim(prefix string, dirs []string) error {
	if prefix == "" {
		return errors.New("cgroup: reclaim needs a name prefix")
	}
	c := &Cgroup{fd: -1}
	for _, d := range dirs {
		if !path.IsAbs(d) || path.Clean(d) != d || !strings.HasPrefix(path.Base(d), prefix) {
			return fmt.Errorf("cgroup: %q is not a cgroup named %s*", d, prefix)
		}
	}
	for _, d := range dirs {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); errors.Is(err, unix.ENOENT) {
			continue
		} else if err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		switch st.Type {
		case unix.CGROUP2_SUPER_MAGIC:
			c.unified = d
			c.hasKill = !disableKillFile && exists(d+"/cgroup.kill")
			if !c.hasKill && exists(d+"/cgroup.freeze") {
				c.freezer, c.freezerV2 = d, true
			}
		case unix.CGROUP_SUPER_MAGIC:
			if exists(d + "/freezer.state") {
				c.freezer, c.freezerV2 = d, false
			}
		default:
			return fmt.Errorf("cgroup: %s is not a cgroup", d)
		}
		c.dirs = append(c.dirs, d)
	}
	if len(c.dirs) == 0 {
		return nil
	}
	return errors.Join(c.kill(), c.removeDirs())
}

// Sweep removes the cgroups whose name starts with prefix, beneath the
// caller's cgroups, that hold no process: those left by a moat process that
// was killed before it could call Destroy. A non-empty one is left alone (the
// kernel refuses to remove it), and so is one younger than a few seconds,
// which a concurrent New may have created and not yet filled.
func Sweep(prefix string) error {
	return sweep(prefix, sweepMinAge)
}

func sweep(prefix string, minAge time.Duration) error {
	if prefix == "" {
		return errors.New("cgroup: sweep needs a name prefix")
	}
	l, err := discover()
	if err != nil {
		return err
	}
	var parents []string
	for _, ctl := range v1Controllers {
		if d, ok := l.v1[ctl]; ok && !slices.Contains(parents, d) {
			parents = append(parents, d)
		}
	}
	if l.v2 != "" {
		parents = append(parents, l.v2)
	}
	// Runs of a user placed in a delegated cgroup above (see v2Parent).
	if os.Geteuid() != 0 {
		if d := delegatedAncestor(l, nil); d != "" {
			parents = append(parents, d)
		}
	}
	// Runs of root placed at the top of the hierarchy (see v2Parent).
	shared := ""
	if l.v2Top != "" && exists(path.Join(l.v2Top, sharedDir)) {
		shared = path.Join(l.v2Top, sharedDir)
		parents = append(parents, shared)
	}
	var errs []error
	if shared != "" {
		// Refused while any run is in it; and not while one of this
		// process's runs is about to make its own directory there.
		defer func() {
			sharedUsers.Lock()
			defer sharedUsers.Unlock()
			if sharedUsers.n == 0 {
				unix.Rmdir(shared)
			}
		}()
	}
	for _, parent := range parents {
		entries, err := os.ReadDir(parent)
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup: %w", err))
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
				continue
			}
			// kernfs dates a directory when its inode is first
			// instantiated, never before its creation: a stale cgroup may
			// look young once, a fresh one never looks old.
			if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < minAge {
				continue
			}
			// EACCES and EPERM: another user's (a root daemon's seen by a
			// user's), not this caller's to remove.
			err := unix.Rmdir(path.Join(parent, e.Name()))
			if err != nil && err != unix.EBUSY && err != unix.ENOENT && err != unix.ENOTEMPTY && err != unix.EACCES && err != unix.EPERM {
				errs = append(errs, fmt.Errorf("cgroup: remove %s: %w", path.Join(parent, e.Name()), err))
			}
		}
	}
	return errors.Join(errs...)
}

// writeFile writes val to a cgroup file in one write(2), returning the bare
// errno so callers can name the file themselves.
func writeFile(file, val string) error {
	fd, err := unix.Open(file, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(file, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return err
	}
	// A v1 memory limit fails with EINTR whenever a signal is pending
	// (the kernel checks before it tries to reclaim), and the Go runtime
	// preempts with SIGURG: try again, as for any interrupted call.
	_, err = unix.Write(fd, []byte(val))
	for err == unix.EINTR {
		_, err = unix.Write(fd, []byte(val))
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}

func exists(p string) bool {
	return unix.Access(p, unix.F_OK) == nil
}

// crowded says whether the caller's v2 cgroup holds processes directly
// and is not exempt from the no-internal-process rule.
func (l layout) crowded() bool {
	if l.exempt() {
		return false
	}
	pids, err := readPids(l.v2 + "/cgroup.procs")
	return err != nil || len(pids) > 0
}

// exempt says whether the caller's v2 cgroup is the hierarchy's real root,
// which the no-internal-process rule exempts. The root of a cgroup
// namespace (a container's) looks like the root in /proc/self/cgroup but is
// not exempt; unlike the real root it has a cgroup.type file.
func (l layout) exempt() bool {
	return l.v2Root && !exists(l.v2+"/cgroup.type")
}

// testV2Controllers are controllers tests require on the unified hierarchy,
// to exercise its placement rules with a controller a hybrid host has there.
var testV2Controllers []string

// sharedDir is the directory beneath the root of the v2 hierarchy that holds
// the runs of a root caller whose own cgroup cannot have children with
// controllers.
const sharedDir = "moat"

// v2Parent chooses the v2 directory in which c's unified directory is made.
// That is the caller's own cgroup, unless a requested controller must be
// enabled for its children and the kernel would refuse: cgroup v2 enables a
// controller for children only in a cgroup that holds no processes itself
// (the root excepted). Then:
//
//   - when the only process in it is this one (moat started in a scope of
//     its own, e.g. systemd-run --user --scope -p Delegate=yes), this
//     process moves into a leaf child of its cgroup, and the runs are made
//     beside that leaf; the last run's Destroy moves it back, disables what
//     was enabled and removes the leaf;
//   - else, for root, the runs go under a directory "moat" at the root of
//     the hierarchy (as container engines do), removed with the last run;
//   - else, for another caller, the runs go in the nearest cgroup above
//     its own that was delegated to it and holds no process (see
//     delegatedAncestor), as when root made a cgroup for a user and put
//     the user's shell in a child of it;
//   - else New fails and says how to give moat a cgroup of its own.
func (c *Cgroup) v2Parent(l layout, onV2 []string, required map[string]bool) (string, error) {
	leaf.Lock()
	defer leaf.Unlock()
	if leaf.users > 0 && l.v2 == leaf.from {
		// This process already sits in its leaf: runs go beside it.
		leaf.users++
		c.inLeaf = true
		return leaf.from, nil
	}
	var missing, have []string
	if !l.exempt() {
		b, err := os.ReadFile(l.v2 + "/cgroup.subtree_control")
		if err != nil {
			return "", fmt.Errorf("cgroup: %w", err)
		}
		have = strings.Fields(string(b))
		for _, ctl := range onV2 {
			if required[ctl] && !slices.Contains(have, ctl) {
				missing = append(missing, ctl)
			}
		}
	}
	if len(missing) == 0 {
		return l.v2, nil
	}
	procs, err := readPids(l.v2 + "/cgroup.procs")
	if err != nil {
		return "", err
	}
	switch {
	case len(procs) == 0:
		return l.v2, nil
	case len(procs) == 1 && procs[0] == os.Getpid():
		dir := path.Join(l.v2, leafName())
		if err := unix.Mkdir(dir, 0o755); err != nil && err != unix.EEXIST {
			return "", fmt.Errorf("cgroup: %s holds this process, which must move to a leaf to enable %s for the run: %w", l.v2, strings.Join(missing, ", "), err)
		}
		if err := writeFile(dir+"/cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
			unix.Rmdir(dir)
			return "", fmt.Errorf("cgroup: move this process to %s: %w", dir, err)
		}
		leaf.users, leaf.from, leaf.dir, leaf.before = 1, l.v2, dir, have
		c.inLeaf = true
		return l.v2, nil
	case os.Geteuid() != 0 && delegatedAncestor(l, missing) != "":
		dir := delegatedAncestor(l, missing)
		if _, err := enableV2(dir, missing, required, false); err != nil {
			return "", err
		}
		return dir, nil
	case os.Geteuid() == 0 && l.v2Top != "" && l.v2Top != l.v2:
		dir := path.Join(l.v2Top, sharedDir)
		if _, err := enableV2(l.v2Top, missing, required, false); err != nil {
			return "", err
		}
		sharedUsers.Lock()
		defer sharedUsers.Unlock()
		if err := unix.Mkdir(dir, 0o755); err != nil && err != unix.EEXIST {
			return "", fmt.Errorf("cgroup: create %s: %w", dir, err)
		}
		sharedUsers.n++
		c.shared = dir
		return dir, nil
	}
	return "", &LimitError{Controller: missing[0], Path: l.v2 + "/cgroup.subtree_control",
		Err: fmt.Errorf("%w: %s holds other processes than moat, so cgroup v2 cannot enable %s for a child (no-internal-process rule); start moat in a cgroup of its own, e.g. with systemd-run --user --scope -p Delegate=yes moat run CMD", unix.EBUSY, l.v2, strings.Join(missing, ", "))}
}

// delegatedAncestor finds, for a caller whose own v2 cgroup cannot have
// children with the controllers ctls (it holds other processes), the
// nearest cgroup above it that was delegated to the caller and can, or "".
// Such a cgroup is writable by the caller (the directory, cgroup.procs and
// cgroup.subtree_control: the kernel moves a process between two cgroups
// only for a writer of their common ancestor's cgroup.procs, so a run can
// be started only beneath one), holds no process itself and offers ctls.
// The search stops at the first cgroup the caller may not write, where the
// delegation begins, and below the mount's root. A systemd unit's cgroup
// (.slice, .scope, .service) ends it too, unless systemd marked it
// delegated (its trusted.delegate or user.delegate attribute) and it is
// otherwise fit: the rest of a user manager's tree is the manager's, which
// may turn a controller off there under a running sandbox.
func delegatedAncestor(l layout, ctls []string) string {
	if l.v2 == "" || l.v2Root || l.v2Mount == "" {
		return ""
	}
	for dir := path.Dir(l.v2); dir != l.v2Mount && strings.HasPrefix(dir, l.v2Mount+"/"); dir = path.Dir(dir) {
		for _, f := range []string{"", "/cgroup.procs", "/cgroup.subtree_control"} {
			if notWritable(dir+f) != "" {
				return ""
			}
		}
		unit := systemdUnit(path.Base(dir))
		if unit && !markedDelegated(dir) {
			return ""
		}
		pids, err := readPids(dir + "/cgroup.procs")
		fit := err == nil && len(pids) == 0 && hasControllers(dir, ctls) == nil
		if fit {
			return dir
		}
		if unit {
			return ""
		}
	}
	return ""
}

// systemdUnit says whether a cgroup's name is that of a systemd unit.
func systemdUnit(name string) bool {
	for _, s := range []string{".slice", ".scope", ".service"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// markedDelegated says whether systemd marked the cgroup dir as delegated.
func markedDelegated(dir string) bool {
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, attr, buf); err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	return false
}

// bareDir makes NewBare's directory in l's v2 cgroup, and returns "" where
// NewBare makes none. Only a caller alone in its cgroup, or in its leaf
// already, can make room for a limited run by moving into a leaf; in a
// cgroup shared with other processes a run's init changes nothing, and the
// run stays out of a cgroup tree someone else manages. The leaf lock is
// held throughout, so that the leaf is neither made nor left between the
// look and the mkdir.
func bareDir(l layout, name string) (string, error) {
	leaf.Lock()
	defer leaf.Unlock()
	if leaf.users == 0 || l.v2 != leaf.from {
		pids, err := readPids(l.v2 + "/cgroup.procs")
		if err != nil || len(pids) != 1 || pids[0] != os.Getpid() {
			return "", nil
		}
	}
	dir := path.Join(l.v2, name)
	if err := unix.Mkdir(dir, 0o755); err != nil {
		if optional(err) {
			return "", nil
		}
		return "", fmt.Errorf("cgroup: create %s: %w", dir, err)
	}
	return dir, nil
}

// hasControllers checks that the controllers ctls are enabled in the v2
// directory dir (its cgroup.controllers lists them).
func hasControllers(dir string, ctls []string) error {
	b, err := os.ReadFile(dir + "/cgroup.controllers")
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	have := strings.Fields(string(b))
	for _, ctl := range ctls {
		if !slices.Contains(have, ctl) {
			return fmt.Errorf("cgroup: %s: %s not enabled: %w", dir, ctl, ErrNoController)
		}
	}
	return nil
}

// sharedUsers counts this process's runs under the shared directory (see
// v2Parent), which the last of them removes: a run must not remove it
// while another one of this process is between making it (or finding it)
// and making its own directory in it. Another moat process's runs may
// still remove it then; New makes it again.
var sharedUsers struct {
	sync.Mutex
	n int
}

// leaveShared gives up c's use of the shared directory, and removes it
// after this process's last run there. A run of another process still
// using it makes the kernel refuse (EBUSY), which is fine.
func (c *Cgroup) leaveShared() {
	if c.shared == "" {
		return
	}
	sharedUsers.Lock()
	defer sharedUsers.Unlock()
	if sharedUsers.n--; sharedUsers.n == 0 {
		unix.Rmdir(c.shared)
	}
	c.shared = ""
}

// leafName is the name of this process's leaf (see v2Parent).
func leafName() string { return fmt.Sprintf("moat-self-%d", os.Getpid()) }

// leaf is this process's move into a leaf of its own cgroup (see v2Parent),
// shared by every run that needs it.
var leaf struct {
	sync.Mutex
	users     int
	from, dir string
	before    []string // from's cgroup.subtree_control before the move
}

// leaveLeaf undoes the move with the last run that needed it: controllers
// off again in the original cgroup, this process back in it, the leaf gone.
func leaveLeaf() error {
	leaf.Lock()
	defer leaf.Unlock()
	if leaf.users--; leaf.users > 0 {
		return nil
	}
	// Everything the runs enabled (for their limits, or only for stats)
	// goes off again: a cgroup with controllers enabled for its children
	// cannot take a process back.
	var errs []error
	file := leaf.from + "/cgroup.subtree_control"
	now, err := os.ReadFile(file)
	if err != nil {
		errs = append(errs, fmt.Errorf("cgroup: %w", err))
	}
	for ctl := range strings.FieldsSeq(string(now)) {
		if slices.Contains(leaf.before, ctl) {
			continue
		}
		if err := writeFile(file, "-"+ctl); err != nil {
			errs = append(errs, fmt.Errorf("cgroup: disable %s in %s: %w", ctl, leaf.from, err))
		}
	}
	if err := writeFile(leaf.from+"/cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
		errs = append(errs, fmt.Errorf("cgroup: move this process back to %s: %w", leaf.from, err))
	} else if err := rmdir(leaf.dir, rmdirTimeout); err != nil {
		errs = append(errs, fmt.Errorf("cgroup: remove %s: %w", leaf.dir, err))
	}
	leaf.from, leaf.dir, leaf.before = "", "", nil
	return errors.Join(errs...)
}

// readPids reads a cgroup.procs file.
func readPids(file string) ([]int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
