package native

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

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
//     background process outliving its shell), to the command its
//     session was made for;
//   - a session's filter sends every setsid to the host before the call
//     goes on (seccomp.WithSetsidNotify), and the host records, under the
//     caller's pid (the id of the session it is about to lead), the
//     command the caller belongs to at that moment; a command's leader's
//     own session is recorded at its first exec. Every session in the
//     sandbox is made that way, a record is replaced by the next setsid
//     at the same pid, and the kernel does not reuse a pid while a
//     process is in the session of that id: so the record a live
//     process's session id finds is its own session's, a process that
//     leaves its command's session stays that command's, and a program
//     that cycles the pids onto an ended command's number and calls
//     setsid there records its own command under the number;
//   - a session whose execs are not checked keeps the same records of
//     its setsids, to end what a command detached (sessionkill_linux.go),
//     and of its refusals: no exec names the commands' leaders there, so
//     each is named by its own setsid, before its exec, and init's
//     "started" (nameLeader);
//   - what can still not be told (a session whose record was lost to a
//     failed /proc read) goes to Create's CheckExec, which decides with
//     nobody's approvals.

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
	threads   int
}

func readProcInfo(pid int) (procInfo, bool) {
	var buf [1024]byte
	b, ok := readProc(pid, "stat", buf[:])
	if !ok {
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
	threads, err3 := strconv.Atoi(f[17])
	start, err4 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return procInfo{}, false
	}
	return procInfo{ppid: ppid, sid: sid, start: start, threads: threads}, true
}

// readProc reads /proc/PID/name into buf, or, when it does not fit, into
// memory of its own. It does without an os.File: a session's supervisor
// reads one for each setsid, each command's leader's included, and an
// os.ReadFile costs several times the open, read and close it makes.
func readProc(pid int, name string, buf []byte) ([]byte, bool) {
	path := "/proc/" + strconv.Itoa(pid) + "/" + name
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil {
		return nil, false
	}
	if n < len(buf) {
		return buf[:n], true
	}
	b, err := os.ReadFile(path)
	return b, err == nil
}

// readTgids returns the id of the process that thread pid is part of,
// and that id in the process's own pid namespace (0 if /proc does not
// tell it).
func readTgids(pid int) (tgid, nsTgid int, ok bool) {
	var buf [4096]byte
	b, rok := readProc(pid, "status", buf[:])
	if !rok {
		return 0, 0, false
	}
	for line := range strings.Lines(string(b)) {
		if v, found := strings.CutPrefix(line, "Tgid:"); found {
			var err error
			if tgid, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
				return 0, 0, false
			}
			ok = true
		} else if v, found := strings.CutPrefix(line, "NStgid:"); found {
			if f := strings.Fields(v); len(f) > 0 {
				nsTgid, _ = strconv.Atoi(f[len(f)-1])
			}
			break
		}
	}
	return tgid, nsTgid, ok
}

// checkExec is the session's CheckExec, as the supervisor asks it: it
// finds the command c came from and asks that command's checker.
func (in *instance) checkExec(c backend.ExecCall) error {
	p, first := in.attribute(c)
	check := in.sessionCheck
	if p != nil && p.check != nil {
		check = p.check
	}
	c.First = first
	return check(c)
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
			// The session the leader made before its exec is its
			// command's (it was told as nobody's: see noteSetsid).
			in.sessions[c.Pid] = first
			if len(in.leaders) >= in.sweepAt {
				in.sweep()
			}
			return first, true
		}
	}
	return in.ownerLocked(c.Pid, self), false
}

// ownerLocked returns the command that process pid (whose /proc says
// info) belongs to, by its ancestors and its session; nil when none can
// be told. in.mu is held.
func (in *instance) ownerLocked(pid int, info procInfo) *process {
	sid := info.sid
	for range 1024 {
		if l, ok := in.leaders[pid]; ok && l.start == info.start {
			return l.p
		}
		if info.ppid == in.r.pid || info.ppid <= 1 {
			break
		}
		pid = info.ppid
		var ok bool
		if info, ok = readProcInfo(pid); !ok {
			break
		}
	}
	return in.sessions[sid]
}

// denialOwner is the owner of the session's denials (see denials): the
// command process pid belongs to by attribute's rules, while the host
// still waits for that command's end; 0 otherwise.
func (in *instance) denialOwner(pid int) uint64 {
	info, ok := readProcInfo(pid)
	if !ok {
		return 0
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	p := in.ownerLocked(pid, info)
	if p == nil || in.procs[p.id] != p {
		return 0
	}
	return p.id
}

// noteSetsid is the supervisor's Setsid: process pid is about to lead a
// session whose id is pid, and the command it belongs to now is recorded
// as that session's, replacing whatever an earlier session of that id
// had (see attribute). A command's leader calls it before its first
// exec, still init's child in init's session: recorded as nobody's until
// that exec names its command.
//
// pid is the calling thread's: the session's id is its process's (the
// thread group's leader's), which is what the record is kept under.
//
// Each exec of a session pays for its leader's setsid, so what must be
// known before the call goes on is read from one file (/proc/PID/stat;
// /proc/PID/status too for a caller of several threads). The number in
// the sandbox, which setsid does not change, is read once the call has
// gone on (the returned func), in.mu held from before the call was let
// go on until then: nothing reads the records in between, so a request
// to end the command, or init's "started", finds them whole.
func (in *instance) noteSetsid(pid int) func() {
	info, ok := readProcInfo(pid)
	tgid, tok := pid, ok
	if ok && info.threads != 1 {
		tgid, _, tok = readTgids(pid)
	}
	in.mu.Lock()
	if !ok || !tok {
		// Gone (its setsid will not happen), or unreadable: no record
		// of an earlier session of that id may stand for the new one.
		delete(in.sessions, pid)
		delete(in.nsSids, pid)
		delete(in.waiting, pid)
		if tok {
			delete(in.sessions, tgid)
			delete(in.nsSids, tgid)
			delete(in.waiting, tgid)
		}
		in.mu.Unlock()
		return nil
	}
	owner := in.ownerLocked(pid, info)
	in.sessions[tgid] = owner
	delete(in.nsSids, tgid)
	waiting, leads := 0, false
	if in.sessionCheck == nil {
		// No exec names the commands' leaders: a child of init calling
		// setsid may be one, which init's "started" names (nameLeader);
		// a session made under one before that waits for its name.
		delete(in.waiting, tgid)
		if owner == nil {
			if waiting = in.pendingOfLocked(pid, info); waiting != 0 {
				in.waiting[tgid] = waiting
			}
		}
		if info.ppid == in.r.pid {
			in.pending[tgid], leads = leader{start: info.start}, true
		}
	}
	sweep := func() {
		if len(in.sessions) >= in.sessSweepAt {
			in.sweep()
		}
	}
	if owner == nil && waiting == 0 && !leads {
		sweep()
		in.mu.Unlock()
		return nil
	}
	return func() {
		defer in.mu.Unlock()
		// Its number in the sandbox, for ending it with its command
		// (sessionsOf): once its leader has died, /proc no longer
		// tells; and for naming a leader (nameLeader).
		if _, nsTgid, ok := readTgids(pid); ok && nsTgid > 1 {
			if owner != nil || waiting != 0 {
				in.nsSids[tgid] = nsTgid
			}
			if leads {
				if old, ok := in.pendingNs[nsTgid]; ok && old != tgid {
					delete(in.pending, old)
				}
				in.pendingNs[nsTgid] = tgid
			}
		}
		sweep()
	}
}

// pendingOfLocked returns the host pid of the child of init, not yet
// named a command's leader, that process pid (whose /proc says info)
// descends from or whose session it leads; 0 if none. in.mu is held.
func (in *instance) pendingOfLocked(pid int, info procInfo) int {
	sid := info.sid
	for range 1024 {
		if l, ok := in.pending[pid]; ok && l.start == info.start {
			return pid
		}
		if info.ppid == in.r.pid || info.ppid <= 1 {
			break
		}
		pid = info.ppid
		var ok bool
		if info, ok = readProcInfo(pid); !ok {
			break
		}
	}
	// A live session's id is not reused: the record is its leader's.
	if _, ok := in.pending[sid]; ok {
		return sid
	}
	return 0
}

// nameLeader records the leader of command p, which init reports it
// started as pid in the sandbox, in a session whose execs are not
// checked: the child of init that called setsid under that number (its
// setsid is answered before init's fork returns, so before "started" is
// sent). The sessions made under it before now become p's. A leader
// already gone is not recorded: init ends a command only while its
// leader lives. in.mu is held.
func (in *instance) nameLeader(p *process, pid int) {
	hp, ok := in.pendingNs[pid]
	if !ok {
		return
	}
	l := in.pending[hp]
	delete(in.pendingNs, pid)
	delete(in.pending, hp)
	if info, ok := readProcInfo(hp); !ok || info.start != l.start || info.ppid != in.r.pid {
		return
	}
	p.leader = hp
	in.leaders[hp] = leader{p: p, start: l.start}
	in.sessions[hp] = p
	for sid, w := range in.waiting {
		if w == hp {
			in.sessions[sid] = p
			delete(in.waiting, sid)
		}
	}
	if len(in.leaders) >= in.sweepAt {
		in.sweep()
	}
}

// sweep forgets the leaders that no live process of the sandbox names as
// its session any more, and the sessions that no live process is in or
// is about to lead: nothing can be attributed to them. It runs each time
// either map has doubled since the last sweep; in.mu is held.
func (in *instance) sweep() {
	live, alive := map[int]bool{}, map[int]bool{}
	in.eachProcess(0, func(pid int, info procInfo, ok bool) {
		alive[pid] = true
		if ok {
			live[info.sid] = true
		}
	})
	for pid := range in.leaders {
		if !live[pid] {
			delete(in.leaders, pid)
		}
	}
	for sid := range in.sessions {
		if !live[sid] && !alive[sid] {
			delete(in.sessions, sid)
			delete(in.nsSids, sid)
			delete(in.waiting, sid)
		}
	}
	for pid := range in.pending {
		if !alive[pid] {
			delete(in.pending, pid)
		}
	}
	for ns, pid := range in.pendingNs {
		if _, ok := in.pending[pid]; !ok {
			delete(in.pendingNs, ns)
		}
	}
	in.sweepAt = max(2*len(in.leaders), minSweep)
	in.sessSweepAt = max(2*len(in.sessions), minSweep)
}

// minSweep is the number of leaders kept before the first sweep.
const minSweep = 256

// sessionsOf returns the sessions recorded as p's (see noteSetsid), by
// their ids in the sandbox's pid namespace, for init to end with p; none
// where the host hears of no setsid (see sessionkill_linux.go).
func (in *instance) sessionsOf(p *process) []int {
	in.mu.Lock()
	defer in.mu.Unlock()
	var sids []int
	var unnamed map[int]bool
	for pid, q := range in.sessions {
		switch {
		case q != p:
		case in.nsSids[pid] > 1:
			sids = append(sids, in.nsSids[pid])
		default:
			if unnamed == nil {
				unnamed = map[int]bool{}
			}
			unnamed[pid] = true
		}
	}
	if unnamed != nil {
		// A session whose leader exited before its number in the
		// sandbox was read (noteSetsid reads it once the setsid has
		// gone on: sh -c "sleep 9 & exit 0" can be gone by then, its
		// sleep left in the session) is found by the processes still in
		// it, whose /proc says the session's number in the sandbox.
		for host, ns := range in.nsSessionsLocked(unnamed) {
			in.nsSids[host] = ns
			sids = append(sids, ns)
		}
	}
	return sids
}

// nsSessionsLocked returns, for each session of want (by host id) that a
// live process of the sandbox is in, its id in the sandbox (NSsid). in.mu
// is held.
func (in *instance) nsSessionsLocked(want map[int]bool) map[int]int {
	found := map[int]int{}
	in.eachProcess(1<<16, func(pid int, info procInfo, ok bool) {
		if ok && want[info.sid] && found[info.sid] == 0 {
			if ns := readNSsid(pid); ns > 1 {
				found[info.sid] = ns
			}
		}
	})
	return found
}

// eachProcess calls fn for each process of the sandbox, init first, with
// what its /proc/PID/stat says (ok false: it could not be read), for at
// most limit of them (0: all).
func (in *instance) eachProcess(limit int, fn func(pid int, info procInfo, ok bool)) {
	todo := []int{in.r.pid}
	for n := 0; len(todo) > 0 && (limit == 0 || n < limit); n++ {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		info, ok := readProcInfo(pid)
		fn(pid, info, ok)
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
}

// readNSsid returns the id, in the innermost pid namespace, of the
// session process pid is in (/proc/PID/status NSsid), or 0.
func readNSsid(pid int) int {
	var buf [4096]byte
	b, ok := readProc(pid, "status", buf[:])
	if !ok {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, found := strings.CutPrefix(line, "NSsid:"); found {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.Atoi(f[len(f)-1])
				return n
			}
		}
	}
	return 0
}
