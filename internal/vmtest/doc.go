// Command vmtest is the init of a QEMU guest that runs moat's tests on a
// kernel other than the host's, with a pure cgroup v2 hierarchy
// (cgroup_no_v1=all): the layout of most current distributions, which the
// machines this project is built on (a v1/v2 hybrid) cannot give. There,
// memory, pids and cpu live on the unified hierarchy, and a user's cgroup
// can be delegated the way systemd delegates one.
//
// scripts/vmtest.sh builds this program into an initramfs with the kernel
// modules it needs, builds the test binaries, and boots the guest under
// software emulation (nested KVM is not usable on these machines). The
// guest mounts the host's root read-only over 9p, runs each step of the
// plan the script wrote (a test binary, as a user, in a cgroup) and prints
// one closing line with the steps that passed and failed. The kernel
// command line names the plan (moat.plan) and, with moat.landlock=absent,
// asks the guest to make sure Landlock is off (the script boots a second
// time with landlock left out of lsm=, for moat's runs on such kernels).
//
// It owns nothing of moat itself and is never part of the moat binary; it
// refuses to run unless it is PID 1.
package main
