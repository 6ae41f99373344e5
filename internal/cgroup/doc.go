// Package cgroup creates one cgroup per sandbox run, applies its memory, pids
// and CPU limits, reads its counters and kills everything in it, on cgroup v1,
// v2 and the hybrid layout (v1 controllers plus a cgroup2 mount without them).
//
// It is written by hand, kept after a measurement against
// github.com/opencontainers/cgroups v0.1.0 (its fs manager for v1 and
// hybrid hosts, fs2 for v2; bench/cgroupcmp is the program, a module of
// its own so that moat's go.mod does not carry the library). Measured on
// the 2-core hybrid test VM as root, under a concurrent CI run's load:
//
//   - What it links. fs2 pulls in no eBPF (that is its devices package,
//     not imported), but both managers import the root package, whose
//     Resources type names go-systemd's D-Bus properties: linking them
//     into moat adds the library and six more modules (go-systemd,
//     godbus, logrus, filepath-securejoin, moby/sys/mountinfo and userns),
//     six package
//     initialisers (about 0.04 ms per process, median of 30; fs's init
//     statfs()es a hard-coded /sys/fs/cgroup/unified) and 0.35 MB of
//     binary (11.82 to 12.17 MB). `moat run -- /bin/true` was not
//     measurably slower (bench/abtime, 300 rounds: +0.02 ms, 95% interval
//     [-0.41, +0.44], median 10.4 ms under that load).
//   - One run's cgroup work (make it beneath the caller's cgroup with
//     memory, pids and CPU limits, add a process, read the counters,
//     kill, remove; six alternating rounds of 100 runs): this package
//     1.66 to 2.57 ms a run (median of the round medians 1.86 ms), the
//     library 3.10 to 3.70 ms (3.28 ms). The library's v1 manager makes and
//     joins a directory on every mounted hierarchy (here nine: also
//     cpuset, blkio, freezer and name=systemd), where this package makes
//     the five a run uses.
//   - What it does. Both nest the run beneath the caller's own cgroup on
//     each v1 hierarchy and read the OOM-kill counter. The library has no
//     kill (no cgroup.kill; it can freeze, but signals no one), no bare
//     cgroup for a run
//     without limits, and nothing for the v2 no-internal-process rule:
//     moving the caller into a leaf, the shared directory beside it and
//     the races between concurrent runs over them (TestConcurrentRuns,
//     TestV2BareBesideLimited) are moat's code either way. Adopting it
//     would replace only the mkdir, limit-file writes and stat reads.
//     fs2 could not be timed here: this host's unified hierarchy has only
//     hugetlb.
//
// So a switch would cost a run time, binary and dependencies and remove
// little code; this package stays hand-written.
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
