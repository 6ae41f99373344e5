package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// cmdDoctor prints what this host can enforce for this caller, and exits
// non-zero when the built-in default policy cannot be enforced. Its last
// check is a real sandbox running /bin/true under the default policy.
// doctorCtx is what the probes' sandboxes run under: cmdDoctor's, which
// a signal ends.
var doctorCtx = context.Background()

func cmdDoctor(args []string, stdout, stderr io.Writer) int {
	if _, ok, code := operands("doctor", "usage: moat doctor", args, 0, 0, stderr); !ok {
		return code
	}
	if runtime.GOOS != "linux" {
		fmt.Fprintf(stdout, "moat run is only supported on Linux (this is %s): nothing here can be enforced\n", runtime.GOOS)
		return 1
	}
	// Ctrl-C, SIGTERM or SIGHUP stops the probe under way (its sandbox
	// killed) and the rest, so that each removes the temporary
	// directory it made, rather than leave it in /tmp.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	doctorCtx = ctx
	defer func() { doctorCtx = context.Background() }()
	ok := true
	line := func(status, what, detail string) {
		if ctx.Err() != nil {
			return // stopped: what is left would only say so
		}
		fmt.Fprintf(stdout, "%-8s %-28s %s\n", status, what, detail)
	}
	uid := os.Geteuid()
	who := fmt.Sprintf("uid %d", uid)
	if uid == 0 {
		who = "root (the command runs as a dedicated unprivileged host uid)"
	}
	h := sandbox.ProbeHost()
	fmt.Fprintf(stdout, "moat %s, kernel %s, caller %s\n\n", versionString(), h.Kernel, who)

	if missing := h.MissingSyscalls; len(missing) > 0 {
		ok = false
		line("MISSING", "system calls", "this kernel does not offer "+strings.Join(missing, " or ")+", which every sandbox needs: "+h.NeedKernel)
	} else {
		line("ok", "system calls", "mount_setattr, close_range with CLOSE_RANGE_CLOEXEC")
	}
	if h.UserNamespaces {
		line("ok", "user namespaces", h.UserNamespacesDetail)
	} else {
		ok = false
		line("MISSING", "user namespaces", h.UserNamespacesDetail)
	}
	if abi := h.LandlockABI; abi > 0 && h.LandlockUsable > 0 {
		line("ok", "landlock", fmt.Sprintf("ABI %d: %s", abi, landlockFeatures(abi)))
	} else if abi > 0 {
		line("absent", "landlock", fmt.Sprintf(`ABI %d cannot handle the "refer" right moat's rules grant on writable paths (Linux 5.19 and later can): file access is checked by the mounts only, and policies with filesystem.landlock = "required" or TCP port rules are refused`, abi))
	} else {
		line("absent", "landlock", `not available on this kernel: file access is checked by the mounts only, and policies with filesystem.landlock = "required" or TCP port rules are refused`)
	}
	if h.Seccomp {
		line("ok", "seccomp", "seccomp-bpf filters available")
	} else {
		line("absent", "seccomp", "seccomp-bpf not available")
	}

	line("info", "network namespaces", "every run gets one with only loopback (exercised by the probe below)")
	if why := sandbox.TransparentEgressUnavailable(); why != "" {
		line("no", "transparent egress", "network mode allow reaches the network through the proxy variables only: "+why)
	} else {
		line("ok", "transparent egress", "in network mode allow, programs that ignore the proxy variables get a TUN device, moat's resolver and the same rules")
	}

	// Root shows writable paths to the command through idmapped mounts,
	// which some filesystems cannot give (tmpfs before Linux 6.3, NFS,
	// FUSE): say whether a workspace here, the default, would run, and
	// whether the probe below, in a temporary directory, can.
	if uid == 0 {
		d := policy.Default()
		if cwd, err := os.Getwd(); err == nil {
			if err := native.CheckIDMap(cwd, d.User.HostUID, d.User.HostGID); err != nil {
				line("no", "idmapped workspace", "a workspace here is refused as root: "+err.Error())
			} else {
				line("ok", "idmapped workspace", "the filesystem of "+cwd+" can be id-mapped: what the command writes in a workspace there lands owned by the workspace's owner")
			}
		}
		if err := native.CheckIDMap(os.TempDir(), d.User.HostUID, d.User.HostGID); err != nil {
			line("info", "  temporary directory", "the default-policy probe below runs there and fails for this reason alone; workspaces on other filesystems may run: "+err.Error())
		}
	}

	info := h.Cgroups
	fmt.Fprintf(stdout, "%-8s %-28s %s\n", "info", "cgroups", "layout "+info.Layout)
	for _, c := range []string{"memory", "pids", "cpu"} {
		switch {
		case info.Usable[c]:
			line("ok", "  "+c+" limits", "available to this caller (cgroup)")
		case c == "pids" && h.NprocPerUserns:
			line("ok", "  pids limits", "by RLIMIT_NPROC in the sandbox's own user namespace (no cgroup: "+info.Why[c]+"); it counts processes and threads, the report says \"pids\": \"rlimit\" in limits_enforced_by, and the forks it refuses do not show in limits_hit")
		default:
			line("no", "  "+c+" limits", info.Why[c])
		}
	}
	line("info", "disk limit", "a tmpfs holds /tmp, home, /dev/shm and an overlay workspace's changes; --disk is refused with a writable direct or copy workspace or --rw paths, which are written in place on the host")
	if uid == 0 {
		fmt.Fprintf(stdout, "%-8s %-28s %s\n", "info", "  for an ordinary user", ordinaryUserCgroups)
	} else if info.HowTo != "" {
		fmt.Fprintf(stdout, "\nTo have cgroup limits here: %s\n\n%s\n", info.HowTo, delegationHelp)
	}

	// The real test: a sandbox under the default policy.
	dir, err := os.MkdirTemp("", "moat-doctor-")
	if err != nil {
		ok = false
		line("FAIL", "default policy", err.Error())
	} else {
		defer os.RemoveAll(dir)
		p := policy.Default()
		p.Workspace.Path = dir
		home, _ := os.UserHomeDir()
		err := p.Resolve(dir, home)
		if err == nil {
			err = p.Validate()
		}
		var out bytes.Buffer
		var rep *sandbox.Report
		if err == nil {
			rep, err = sandbox.Run(doctorCtx, &sandbox.Request{Policy: p, Args: []string{"/bin/true"}},
				backend.Stdio{Stdout: &out, Stderr: &out})
		}
		switch {
		case err != nil:
			ok = false
			line("FAIL", "default policy", "a sandbox could not run: "+err.Error())
		case rep.ExitCode != 0:
			ok = false
			line("FAIL", "default policy", fmt.Sprintf("/bin/true exited %d: %s", rep.ExitCode, strings.TrimSpace(out.String())))
		default:
			line("ok", "default policy", fmt.Sprintf("a sandbox ran /bin/true in %.1f ms (namespaces, mounts, limits)", rep.WallSeconds*1000))
		}
	}
	overlayProbe(line)
	gvisorProbe(line, h.Kernel)
	if h.FastStart {
		line("ok", "fast start", "built with moat's entry point (-ldflags=-E=_rt0_moat)")
	} else {
		line("info", "fast start", "built without moat's entry point: each run starts ~0.2 ms later; build with -ldflags=-E=_rt0_moat (see the README)")
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "moat doctor: interrupted")
		return 128 + int(syscall.SIGINT)
	}
	if !ok {
		fmt.Fprintln(stdout, "\nThe default policy cannot be enforced on this host: see the lines marked MISSING or FAIL.")
		return 1
	}
	return 0
}

// ordinaryUserCgroups is what a non-root caller gets, as root sees it.
var ordinaryUserCgroups = "none unless delegated: a non-root caller gets rlimit (pids too, from Linux 5.14), wall-clock and output limits;\n" +
	strings.Repeat(" ", 38) + "memory and cpus need a delegated cgroup subtree (see below)\n\n" + delegationHelp

const delegationHelp = `To give an ordinary user cgroup limits (memory, pids, cpus):
  cgroup v2 with a systemd user manager: run moat in a delegated scope of its own,
      systemd-run --user --scope -p Delegate=yes moat run ...
    (a user manager runs while the user is logged in, and always after loginctl enable-linger USER).
    moat cannot move itself there: the kernel moves a process between two cgroups only for a
    writer of their common ancestor, and a login's session scope and user@UID.service meet in
    root's user-UID.slice; systemd-run has systemd move it.
  cgroup v2 without systemd (as root, for user alice):
      mkdir /sys/fs/cgroup/moatuser-alice
      echo '+memory +pids +cpu' > /sys/fs/cgroup/cgroup.subtree_control
      chown alice /sys/fs/cgroup/moatuser-alice /sys/fs/cgroup/moatuser-alice/cgroup.{procs,subtree_control,threads}
      mkdir /sys/fs/cgroup/moatuser-alice/shell; echo PID > /sys/fs/cgroup/moatuser-alice/shell/cgroup.procs
      (PID: alice's shell); moat started from that shell makes its runs in moatuser-alice.
  cgroup v1 (as root, once per boot, for user alice):
      for c in memory pids cpu cpuacct; do
        mkdir -p /sys/fs/cgroup/$c/moatuser-alice && chown -R alice /sys/fs/cgroup/$c/moatuser-alice
      done
      and, as alice, move the shell inside them (echo $$ > .../moatuser-alice/cgroup.procs for each).
  Without delegation, limits.memory/cpus make moat refuse to run unless --allow-degraded;
  limits.pids is enforced with RLIMIT_NPROC instead (Linux 5.14 and later).`

// overlayProbe runs /bin/true with an overlay workspace, in a throw-away
// state directory, to tell whether --workspace-mode overlay works here.
func overlayProbe(line func(status, what, detail string)) {
	dir, err := os.MkdirTemp("", "moat-doctor-")
	if err != nil {
		line("warn", "overlay workspace", err.Error())
		return
	}
	defer os.RemoveAll(dir)
	ws, state := filepath.Join(dir, "ws"), filepath.Join(dir, "state")
	os.Mkdir(ws, 0o755)
	old, had := os.LookupEnv("MOAT_STATE_DIR")
	os.Setenv("MOAT_STATE_DIR", state)
	defer func() {
		if had {
			os.Setenv("MOAT_STATE_DIR", old)
		} else {
			os.Unsetenv("MOAT_STATE_DIR")
		}
		// overlayfs leaves its work directory with mode 0
		filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o700)
			}
			return nil
		})
	}()
	p := policy.Default()
	p.Workspace.Path = ws
	p.Workspace.Mode = policy.WorkspaceOverlay
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		line("warn", "overlay workspace", err.Error())
		return
	}
	rep, err := sandbox.Run(doctorCtx, &sandbox.Request{Policy: p, Args: []string{"/bin/true"}}, backend.Stdio{})
	switch {
	case err != nil:
		line("no", "overlay workspace", "overlayfs cannot be mounted in a user namespace here ("+err.Error()+"); use --workspace-mode copy")
	case rep.ExitCode != 0:
		line("no", "overlay workspace", fmt.Sprintf("/bin/true exited %d; use --workspace-mode copy", rep.ExitCode))
	default:
		line("ok", "overlay workspace", "overlayfs works in a user namespace (--workspace-mode overlay)")
	}
}

// gvisorProbe says whether --isolation gvisor can run here (runsc found,
// root, /bin/true under it) and what gVisor does differently.
func gvisorProbe(line func(status, what, detail string), hostKernel string) {
	runsc, err := gvisor.Find("")
	switch {
	case err != nil:
		line("absent", "gvisor isolation", err.Error())
		return
	case os.Geteuid() != 0:
		line("no", "gvisor isolation", "runsc is "+runsc+", but it runs sandboxes for root only here (rootless runsc has no network isolation of its own)")
		return
	}
	dir, err := os.MkdirTemp("", "moat-doctor-")
	if err != nil {
		line("warn", "gvisor isolation", err.Error())
		return
	}
	defer os.RemoveAll(dir)
	p := policy.Default()
	p.Workspace.Path = dir
	p.Sandbox.Isolation = policy.IsolationGVisor
	// The probe asks whether runsc runs a sandbox here; the rules' check
	// at each exec, which gvisor cannot make, is said below.
	p.Harness.Builtin = []string{}
	// runsc has no id-mapped mounts: the workspace is the sandbox user's.
	os.Chown(dir, p.User.UID, p.User.GID)
	home, _ := os.UserHomeDir()
	if err := p.Resolve(dir, home); err != nil {
		line("warn", "gvisor isolation", err.Error())
		return
	}
	// uname -r rather than /bin/true: a program that is not runsc, or a
	// runsc that ran nothing, cannot print a kernel other than the host's.
	var out bytes.Buffer
	rep, err := sandbox.Run(doctorCtx, &sandbox.Request{Policy: p, Args: []string{"uname", "-r"}}, backend.Stdio{Stdout: &out, Stderr: &out})
	kernel := strings.TrimSpace(out.String())
	switch {
	case err != nil:
		line("no", "gvisor isolation", "runsc is "+runsc+", but a sandbox could not run: "+err.Error())
		return
	case rep.ExitCode != 0:
		line("no", "gvisor isolation", fmt.Sprintf("runsc is %s, but uname -r exited %d: %s", runsc, rep.ExitCode, kernel))
		return
	case kernel == "" || kernel == hostKernel:
		line("no", "gvisor isolation", fmt.Sprintf("runsc is %s, but the command under it saw the kernel %q, not gVisor's: is it runsc?", runsc, kernel))
		return
	}
	line("ok", "gvisor isolation", fmt.Sprintf("--isolation gvisor: runsc %s ran uname -r in %.0f ms (gVisor's kernel: %s)", runsc, rep.WallSeconds*1000, kernel))
	line("info", "  what differs", "the command runs on gVisor's kernel, not the host's; no Landlock (the mounts decide);\n"+
		strings.Repeat(" ", 38)+"seccomp applied by gVisor (refusals get EPERM or ENOSYS, a kill ends the thread, none is reported);\n"+
		strings.Repeat(" ", 38)+"sessions: commands are runsc exec into one container; --memory/--cpus bound the whole sandbox\n"+
		strings.Repeat(" ", 38)+"(the sentry included: past the memory limit the sandbox ends);\n"+
		strings.Repeat(" ", 38)+"refused: --pids (a host cgroup would count the sentry's threads), --disk (its tmpfs is the\n"+
		strings.Repeat(" ", 38)+"sentry's memory), custom seccomp profiles, TCP port rules, a writable workspace the sandbox\n"+
		strings.Repeat(" ", 38)+"user does not own (no id-mapped mounts), and command rules (the built-in set included: gVisor\n"+
		strings.Repeat(" ", 38)+"passes no exec notification to moat; [harness] builtin = [], or --allow-degraded for command lines only)")
}

// landlockFeatures says what moat gets from Landlock at a given ABI.
func landlockFeatures(abi int) string {
	f := "file access re-checked"
	if abi >= 4 {
		f += "; TCP port rules (network.tcp_bind, tcp_connect)"
	} else {
		f += "; no TCP port rules (ABI 4, Linux 6.7)"
	}
	if abi >= 6 {
		f += "; signals and abstract unix sockets scoped to the sandbox"
	}
	return f
}
