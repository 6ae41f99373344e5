package native

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/moatbox/moat/backend"
)

// Checking each exec of a session (Create's Stdio.CheckExec). The session's
// init installs the exec-checking filter on itself, as a one-shot init
// installs it before forking its command, so every process of the
// session inherits it, and the host's supervisor answers for the
// session's whole life (it stops with the instance). Each call is
// attributed to the Exec whose process tree it came from and asked of
// that Exec's Stdio.CheckExec; the host reads the tree from /proc:
//
//   - a process whose own exec started a command is that command's
//     leader: init forked it (its parent is init), it leads a session of
//     its own, and its argv is the one the host sent; it is recorded, and
//     its exec is the command's First;
//   - any other process belongs to the first leader among its ancestors,
//     or, once an ancestor has died and it was re-parented to init (a
//     background process outliving its shell), to the leader of its
//     session: commands never share one, and a pid is not reused while it
//     still names a session;
//   - a process that left its command's session and lost its ancestors
//     (setsid in an orphan) cannot be attributed: Create's CheckExec
//     decides it, with nobody's approvals.

// leader is the host's record of a command's first process.
type leader struct {
	p     *process
	start uint64 // its start time, which tells a reused pid
}

// procInfo is what /proc/PID/stat says of a process, in the host's pid
// namespace.
type procInfo struct {
	ppid, sid int
	start     uint64
}

func readProcInfo(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// pid (comm) state ppid pgrp session ... starttime (field 22): comm
	// may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	sid, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procInfo{}, false
	}
	return procInfo{ppid: ppid, sid: sid, start: start}, true
}

// checkExec is the session's CheckExec, as the supervisor asks it: it
// finds the command c came from and asks that command's checker.
func (in *instance) checkExec(ctx context.Context, c backend.ExecCall) error {
	p, first := in.attribute(c)
	check := in.sessionCheck
	if p != nil && p.check != nil {
		check = p.check
	}
	c.First = first
	return check(ctx, c)
}

// attribute returns the command whose process made call c, and whether c
// is that command's own first exec; nil when none can be told.
func (in *instance) attribute(c backend.ExecCall) (*process, bool) {
	self, ok := readProcInfo(c.Pid)
	if !ok {
		return nil, false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if self.ppid == in.r.pid && self.sid == c.Pid {
		if l, ok := in.leaders[c.Pid]; ok && l.start == self.start {
			return l.p, false
		}
		// The oldest command sent and not yet started whose argv this
		// is: init forks them in the order they were sent.
		var first *process
		for _, p := range in.procs {
			if p.leader == 0 && slices.Equal(p.spec.Args, c.Argv) && filepath.Base(c.Path) == filepath.Base(p.spec.Args[0]) &&
				(first == nil || p.id < first.id) {
				first = p
			}
		}
		if first != nil {
			first.leader = c.Pid
			in.leaders[c.Pid] = leader{p: first, start: self.start}
			if len(in.leaders) >= in.sweepAt {
				in.sweepLeaders()
			}
			return first, true
		}
	}
	pid, info := c.Pid, self
	for range 1024 {
		if l, ok := in.leaders[pid]; ok && l.start == info.start {
			return l.p, false
		}
		if info.ppid == in.r.pid || info.ppid <= 1 {
			break
		}
		pid = info.ppid
		if info, ok = readProcInfo(pid); !ok {
			break
		}
	}
	if l, ok := in.leaders[self.sid]; ok {
		return l.p, false
	}
	return nil, false
}

// sweepLeaders forgets the leaders that no live process of the sandbox
// names as its session any more: nothing can be attributed to them. It
// runs each time the map has doubled since the last sweep; in.mu is held.
func (in *instance) sweepLeaders() {
	live := map[int]bool{}
	todo := []int{in.r.pid}
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if info, ok := readProcInfo(pid); ok {
			live[info.sid] = true
		}
		threads, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		for _, th := range threads {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + th.Name() + "/children")
			for _, w := range strings.Fields(string(b)) {
				if child, err := strconv.Atoi(w); err == nil {
					todo = append(todo, child)
				}
			}
		}
	}
	for pid := range in.leaders {
		if !live[pid] {
			delete(in.leaders, pid)
		}
	}
	in.sweepAt = max(2*len(in.leaders), minSweep)
}

// minSweep is the number of leaders kept before the first sweep.
const minSweep = 256
