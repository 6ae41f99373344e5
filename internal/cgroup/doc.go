// Package cgroup creates one cgroup per sandbox run, applies its memory, pids
// and CPU limits, reads its counters and kills everything in it, on cgroup v1,
// v2 and the hybrid layout (v1 controllers plus a cgroup2 mount without them).
//
// It is written by hand on purpose. opencontainers/cgroups and
// containerd/cgroups pull in systemd, D-Bus and eBPF code, and this package is
// linked into the moat binary that is re-executed for every sandbox start. We
// need only create, limit, stats, kill and remove; that is a few hundred lines
// of file writes.
//
// Nothing is hard-coded: mounts come from /proc/self/mountinfo and the
// caller's cgroup from /proc/self/cgroup. A run's cgroup is a directory named
// after the run, created beneath the caller's own cgroup on every hierarchy
// it uses: one per v1 hierarchy (memory, pids, cpuacct for stats; cpu when a
// CPU quota is asked; freezer when nothing else can kill the whole group)
// plus one on the unified hierarchy when it is mounted, so that cgroup.kill
// and a cgroup v2 directory fd exist even on a hybrid host.
//
// On pure cgroup v2 a cgroup can enable controllers for its children only
// when it holds no processes itself (the no-internal-process rule; the root
// is exempt), and the caller's cgroup usually holds at least moat. When moat
// is alone in it (started in a scope of its own), New moves moat into a leaf
// child and makes the run beside it, undoing the move after the last run;
// for root, runs go under a "moat" directory at the root of the hierarchy,
// as container engines do; otherwise New fails for a requested limit, and
// [Probe] says why and how to give moat a cgroup of its own. For that
// to work while other runs are in progress, a run without limits must not
// sit in moat's cgroup or its leaf either: [NewBare] gives it a directory
// of its own, without controllers, beside them.
package cgroup
