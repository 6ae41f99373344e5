package native

import (
	"os"
	"strconv"
	"syscall"
)

// Ending a command at its wall clock or output limit (reqKill). Killing
// its process group is not enough: a program it started may have made a
// session of its own (setsid, a daemon's double fork), outside the group
// and, once its parent has died, outside the command's process tree,
// re-parented to init. A command that ends by itself leaves such
// processes running, on purpose (a dev server); one that is ended at a
// limit must not, or the limit would not stop what it was meant to stop.
//
// Init kills every process of the sandbox that belongs to the command:
//
//   - those in a session the command owns: the leader's own, and those
//     the host attributed to it (its supervisor hears of each setsid, see
//     sessioncheck_linux.go, and sends them with the request);
//   - the descendants of any of them, and the sessions those lead.
//
// It stops each such process (SIGSTOP) and looks again, until a look
// finds none it has not stopped: a stopped process cannot fork, and a
// child forked before its parent stopped is found by the next look
// through its parent, which is still alive. Then it kills them all.
//
// A process that made a session of its own and whose parents up to the
// command have all died (a double fork) is told apart from another
// command's only by the host's record of that setsid. So every session's
// filter sends each setsid to the host, whether or not it checks execs
// (seccomp.Notify with Setsid alone: no exec is sent where none is
// checked), and the host, not init, answers the filter's notifications.
// setsid is the only way to make a session, and the kernel asks before
// each, so a command cannot make one the host does not hear of. Without
// the exec check the host learns each command's leader from its setsid
// (a child of init's) and init's "started" (nameLeader). The price is
// one round trip to the host per setsid, each command's leader's own
// included: one per exec (an exec-checked session pays two).
//
// Init cannot hear of each setsid itself: its filter's notifications
// would be answered by a goroutine of init, and each command's own
// setsid comes while init's forking thread, in vfork, holds a P the
// goroutine may need (a deadlock seen in testing). Two other ways were
// weighed and left:
//
//   - PR_SET_CHILD_SUBREAPER on each command's first process, which
//     would keep its orphans in its tree while it lives: it must be set
//     between fork and exec, where Go's ForkExec runs no code of ours;
//     and it changes what the command's first program sees: orphans it
//     never asked for come back to its wait(-1), or stay zombies
//     (counted against the pids limit) under one that never reaps them.
//   - A cgroup per command (clone3 into it, cgroup.kill to end it),
//     which the kernel keeps every descendant in: only where a cgroup v2
//     hierarchy is delegated to the caller, which a rootless caller or a
//     v1 or hybrid host does not have.
//
// Where the host cannot hear of them (a kernel without
// SECCOMP_USER_NOTIF_FLAG_CONTINUE, a custom seccomp profile with no
// filter under it; see execFilters), such a process survives as before.

// scanProcs reads every process of the sandbox but init from /proc.
func scanProcs() map[int]procInfo {
	procs := map[int]procInfo{}
	d, err := os.Open("/proc")
	if err != nil {
		return procs
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	self := os.Getpid()
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == self || pid <= 1 {
			continue
		}
		if info, ok := readProcInfo(pid); ok {
			procs[pid] = info
		}
	}
	return procs
}

// members returns the processes of procs that belong to the command led
// by leader, whose sessions are owned (to which it adds those its
// processes lead).
func members(procs map[int]procInfo, leader int, owned map[int]bool) []int {
	children, bySid := map[int][]int{}, map[int][]int{}
	for pid, info := range procs {
		children[info.ppid] = append(children[info.ppid], pid)
		bySid[info.sid] = append(bySid[info.sid], pid)
	}
	seen := map[int]bool{}
	var todo, out []int
	add := func(pid int) {
		if _, ok := procs[pid]; ok && !seen[pid] {
			seen[pid] = true
			todo = append(todo, pid)
		}
	}
	own := func(sid int) {
		owned[sid] = true
		for _, pid := range bySid[sid] {
			add(pid)
		}
	}
	for sid := range owned {
		own(sid)
	}
	add(leader)
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		out = append(out, pid)
		if info := procs[pid]; info.sid == pid && !owned[pid] {
			own(pid)
		}
		for _, c := range children[pid] {
			add(c)
		}
	}
	return out
}

// killCommand kills every process of command id (see above), while its
// leader lives: once the leader has been reaped the command has ended,
// and what it left running is no longer its to end. sids are the
// sessions the host attributed to it, in the sandbox's pid namespace.
func (s *sessionInit) killCommand(id uint64, sids []int) {
	// s.mu keeps the reaper from reaping the leader, and so its pid from
	// being reused, while the command is looked for.
	s.mu.Lock()
	defer s.mu.Unlock()
	leader, ok := s.byID[id]
	if !ok {
		return
	}
	owned := map[int]bool{leader: true}
	for _, sid := range sids {
		if sid > 1 {
			owned[sid] = true
		}
	}
	stopped := map[int]uint64{} // pid: its start time
	signal := func(pid int, start uint64, sig syscall.Signal) {
		// The pid is checked to still be that process's: it may have
		// died (another's SIGKILL) and the number been reused.
		if info, ok := readProcInfo(pid); ok && info.start == start {
			syscall.Kill(pid, sig)
		}
	}
	// Each look either stops a new process or ends; the bound only
	// guards against a /proc that keeps showing new numbers.
	for range 1000 {
		procs := scanProcs()
		fresh := false
		for _, pid := range members(procs, leader, owned) {
			start := procs[pid].start
			if st, ok := stopped[pid]; ok && st == start {
				continue
			}
			signal(pid, start, syscall.SIGSTOP)
			stopped[pid], fresh = start, true
		}
		if !fresh {
			break
		}
	}
	for pid, start := range stopped {
		signal(pid, start, syscall.SIGKILL)
	}
	// And the group, as before, should /proc have shown nothing.
	syscall.Kill(-leader, syscall.SIGKILL)
}
