//go:build linux

package native

// ForceHoldersForTesting makes a root direct start id-map its trees with
// holders, as on a host whose AppArmor restricts the user namespaces of
// unprivileged processes (see nestable), until undo is called.
func ForceHoldersForTesting() (undo func()) {
	old := usernsRestricted
	usernsRestricted = func() bool { return true }
	return func() { usernsRestricted = old }
}

// UsernsRestricted reports whether this host's AppArmor restricts
// unprivileged user namespaces, where root's direct starts take holders.
func UsernsRestricted() bool { return usernsRestricted() }

// SessionLeadersForTesting is how many commands' first processes a
// session that checks execs remembers (see attribute).
func SessionLeadersForTesting(inst any) int {
	in := inst.(*instance)
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.leaders)
}

// SessionInitPidForTesting is the host pid of a session's init.
func SessionInitPidForTesting(inst any) int { return inst.(*instance).r.pid }

// LeaderPidForTesting is the host pid of the first process of proc, a
// command of the session inst that checks execs (0 until seen).
func LeaderPidForTesting(inst, proc any) int {
	in := inst.(*instance)
	in.mu.Lock()
	defer in.mu.Unlock()
	return proc.(*process).leader
}

// NoteSetsidForTesting tells the session inst that thread pid is about to
// call setsid, as its supervisor does, and reports under which session
// ids it then has a record.
func NoteSetsidForTesting(inst any, pid int) []int {
	in := inst.(*instance)
	if after := in.noteSetsid(pid); after != nil {
		after()
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	var ids []int
	for id := range in.sessions {
		ids = append(ids, id)
	}
	return ids
}
