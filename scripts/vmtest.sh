#!/usr/bin/env bash
# Runs moat's kernel-facing test suites in a QEMU guest with a pure cgroup
# v2 hierarchy (cgroup_no_v1=all) and Debian's stock kernel, as root and as
# an ordinary user with and without a delegated cgroup. The machines this
# project is built on have a v1/v2 hybrid layout, where memory, pids and cpu
# live on v1; most distributions now boot pure v2, and this is where moat's
# v2 limits are tested for real. A second boot leaves Landlock out of the
# kernel's LSMs and runs the sandbox suites again, as on a kernel without
# it. See internal/vmtest for the guest side.
#
# Needs root (it installs QEMU and fetches the kernel package with apt) and
# about 5 GiB of memory. Called by scripts/test.sh; run it alone with
#   sudo scripts/vmtest.sh
# Environment: MOAT_TEST_USER (the ordinary user, default moatci),
# MOAT_VMTEST_CACHE (where the kernel is kept, default /var/cache/moat-vmtest),
# MOAT_VMTEST_TIMEOUT (seconds one boot of the guest may run, default 3000,
# well above the first boot's time on a 2-core host; a stuck guest is
# caught sooner by MOAT_VMTEST_STALL),
# MOAT_VMTEST_STEPS (an extended regular expression: run only the steps whose
# names match, e.g. 'cgroup|session'), MOAT_VMTEST_STALL (seconds without
# output after which the guest counts as stuck, default 240), MOAT_VMTEST_RUN
# (a -test.run pattern, without spaces, for every step chosen).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0

if [ "$(id -u)" -ne 0 ]; then
	echo "vmtest: needs root (installs QEMU and the guest kernel with apt)" >&2
	exit 2
fi
user="${MOAT_TEST_USER:-moatci}"
if ! uid=$(id -u "$user" 2>/dev/null); then
	echo "vmtest: no user $user for the rootless steps: create one, or name another in MOAT_TEST_USER" >&2
	exit 2
fi
cache="${MOAT_VMTEST_CACHE:-/var/cache/moat-vmtest}"

# Tools: QEMU (software emulation: nested KVM is not usable on these
# machines), cpio for the initramfs, mkfs.ext4 for the guest's /tmp.
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v cpio >/dev/null || need+=(cpio)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
if ((${#need[@]})); then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The guest kernel: the one Debian's linux-image-amd64 points at, unpacked
# (not installed: the host's boot set-up is none of this script's business).
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$pkg" ]; then
	apt-get update -qq
	pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
kdir="$cache/$pkg"
if [ ! -d "$kdir/boot" ]; then
	rm -rf "$kdir.tmp"
	mkdir -p "$kdir.tmp"
	if ! (cd "$kdir.tmp" && apt-get download -qq "$pkg" 2>/dev/null && dpkg-deb -x ./*.deb . && rm ./*.deb); then
		echo "vmtest: could not fetch and unpack the guest kernel ($pkg) with apt-get download" >&2
		exit 1
	fi
	mv "$kdir.tmp" "$kdir"
fi
kver=$(ls "$kdir/lib/modules")
mods="$kdir/lib/modules/$kver/kernel"

work=$(mktemp -d /var/tmp/moat-vmtest.XXXXXX)
# qpid is the guest being run: however the script ends (a failure, Ctrl-C,
# SIGTERM from CI's timeout), the emulator ends with it.
qpid=
stopguest() {
	if [ -n "$qpid" ]; then
		pkill -KILL -P "$qpid" qemu-system-x86 2>/dev/null || true
		kill -KILL "$qpid" 2>/dev/null || true
		wait "$qpid" 2>/dev/null || true
		qpid=
	fi
}
trap 'stopguest; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$work/initrd/modules" "$work/bin"

# The initramfs: the guest init and the modules it loads (in any order; it
# retries until their dependencies are in): virtio over PCI, 9p for the
# shares, virtio-blk and ext4 for /tmp, overlayfs for overlay workspaces,
# tun for transparent egress.
go build -o "$work/initrd/init" ./internal/vmtest
for m in drivers/virtio/virtio.ko drivers/virtio/virtio_ring.ko \
	drivers/virtio/virtio_pci.ko drivers/virtio/virtio_pci_legacy_dev.ko \
	drivers/virtio/virtio_pci_modern_dev.ko net/9p/9pnet.ko net/9p/9pnet_virtio.ko \
	fs/netfs/netfs.ko fs/fscache/fscache.ko fs/9p/9p.ko drivers/block/virtio_blk.ko \
	lib/crc16.ko crypto/crc32c_generic.ko fs/mbcache.ko fs/jbd2/jbd2.ko fs/ext4/ext4.ko \
	fs/overlayfs/overlay.ko drivers/net/tun.ko; do
	cp "$mods/$m" "$work/initrd/modules/"
done
mkdir -p "$work/initrd/"{dev,proc,sys,newroot}
(cd "$work/initrd" && find . | cpio -o -H newc --quiet | gzip -1 >"$work/initrd.gz")

# The suites that touch the kernel, and two plans, one per boot.
# plan: every suite as root and as the user in a delegated cgroup; the
# sandbox's and the CLI's as root in a cgroup shared with another process (a
# login session's scope); as the user without delegation, the tests of what
# that user is refused.
# plan-nolandlock, for a boot with Landlock left out of lsm=: the suites
# that run sandboxes, as root, and the file-access tests as the user. The
# mounts alone must hold, "auto" must run and warn, "required" and TCP port
# rules must be refused.
pkgs=(internal/cgroup backend/native sandbox workspace cmd/moat internal/seccomp httpapi)
# The tests whose subject is where a run's cgroup goes and what it holds:
# limits, leftovers, sessions, signals. limits is the sandbox suite's,
# climits the CLI's.
limits='Limit|ForkBomb|Leftover|Survivor|Cgroup|Memory|CPU|Wall|Disk|Cancel|Concurrent|Session|Pids|Process'
climits='Limit|Memory|Disk|Killed|Survivors|Cgroup|EarlySignal|Session|Serve|Signals|CtrlZ|Interrupt'
# The sandbox suite's seccomp probe, built here: the guest's build cache is
# read-only, and a build under emulation would take minutes.
go build -buildvcs=false -o "$work/bin/seccomp-probe" ./sandbox/testdata/seccompprobe
plan="$work/bin/plan"
nolandlock="$work/bin/plan-nolandlock"
for p in "${pkgs[@]}"; do
	name=$(echo "$p" | tr / -)
	go test -c -o "$work/bin/$name.test" "./$p"
	# -test.short: the load tests (httpapi) make a tenth of their sessions
	# and execs under emulation. The daemon's tests whose subject is no
	# kernel's (the audit log's rate bounds, bodies that stall, the HTTP
	# server's first requests) are slow under emulation and ran on the
	# host: no step runs them.
	# Nor does the flood of DNS probes through the TUN device: the
	# resolver's rate bounds are its subject.
	# gVisor's tests of moat's own logic (its proxy, its files, trust)
	# ran on the host as root: here the kernel's part is left, that runsc
	# runs, and its limits in a cgroup v2 hierarchy.
	# Nor do the tests of moat's own logic that are long here: the asks
	# of the proxy (NetworkAsk), the device's bulk throughput (its
	# checksum offload, the kernel's part, stays), and the apply's
	# signals, whose 3,000-file change set takes minutes to make under
	# emulation, after which the apply ends before the test can
	# interrupt it (it skips). The planted git config's test runs in the
	# no-Landlock boot, where the mounts alone must hold.
	common=''
	case $p in
	httpapi) common=' -test.skip DaemonAudit|Stalled|FirstRequestsAtOnce' ;;
	sandbox) common=' -test.skip TransparentDNSProbes|TransparentBulk|NetworkAsk$|PlantedGitConfigDoesNotRunOnHost|GVisor(AllowThroughProxy|DenyInSentryFiles|OverlaySession|StdinFileUntouched|RunscChangedAfterTrust|SystemIDsRefused|RefusesExecChecks|TUNDropped)' ;;
	cmd/moat) common=' -test.skip ApplyHoldsSignals' ;;
	esac
	echo "root-$name 0 - $p $name.test -test.v -test.count=1 -test.short$common" >>"$plan"
	# As the user in a delegated cgroup, what differs from root is the
	# cgroup the user makes and the namespaces an unprivileged user may
	# make: the sandbox's and the CLI's tests of limits, leftovers,
	# sessions and signals run (the whole suites ran as the user on the
	# host, without a delegated cgroup, and as root above). The tools'
	# everyday work and the two starts' comparison, the longest tests
	# under emulation, are left out, and so are the transparent path's
	# tests but the device's making and use as the user (the kernel's
	# part). A test binary takes one -test.skip (the last wins): the lists
	# below repeat the common one.
	skip=$common run=''
	case $p in
	sandbox)
		skip=' -test.skip CommonToolsWork|TransparentDNSProbes|TransparentBulk|TransparentAlert|TransparentNotTLS|TransparentOff|TUNFailure|ThroughTUN|GVisor|SessionExecCheckManyCommands|SessionDenialsAreTheirCommands'
		run=" -test.run $limits|Transparent|TUN|Refuses|Landlock|Identity" ;;
	cmd/moat) run=" -test.run $climits|Terminal" ;;
	backend/native) skip=' -test.skip DirectStartMatchesInitStage' ;;
	esac
	echo "delegated-$name $uid delegated $p $name.test -test.v -test.count=1 -test.short$run$skip" >>"$plan"
done
# In a shared cgroup, what differs is where a run's cgroup goes: the tests
# of limits, leftovers and sessions say whether that holds (the rest of the
# suite ran above).
# gVisor's tests ran as root in the first step; here they would only add
# minutes of emulation.
# The exec check's attribution in a session (which command a denial was
# of) ran as root: its subject is the check, not the cgroup.
echo "session-sandbox 0 session sandbox sandbox.test -test.v -test.count=1 -test.run $limits -test.skip GVisor|Transparent|SessionExecCheckManyCommands|SessionDenialsAreTheirCommands" >>"$plan"
echo "session-cmd-moat 0 session cmd/moat cmd-moat.test -test.v -test.count=1 -test.run $climits -test.skip ApplyHoldsSignals" >>"$plan"
echo "user-sandbox $uid - sandbox sandbox.test -test.v -test.count=1 -test.run Refuses|Limit|ForkBomb" >>"$plan"
echo "user-cgroup $uid - internal/cgroup internal-cgroup.test -test.v -test.count=1 -test.run Probe" >>"$plan"
for p in backend/native sandbox cmd/moat; do
	name=$(echo "$p" | tr / -)
	# What does not depend on Landlock ran in the first boot and is left
	# out here: the tools' everyday work, the budgets' clocks, gVisor, the
	# exec check (seccomp), the guard's moves on the host, the proxy's
	# network rules and the transparent path, the process limits, and the
	# comparison of the two starts. The protected paths' tests (planted git config, submodules)
	# stay: there the mounts alone must hold. Of the CLI's, those of what
	# Landlock would take part in: doctor's report, the workspace's
	# protected paths, an overlay's review and apply, trust.
	run=''
	[ "$p" = cmd/moat ] && run=' -test.run Doctor|Guard|Bare|Overlay|Review|Protected|Planted|Trust|RunPrints|Denied|Workspace'
	echo "nolandlock-root-$name 0 - $p $name.test -test.v -test.count=1$run -test.skip CommonToolsWork|Budget|GVisor|Fuzz|ExecCheck|KillAtExec|GuardMovesNothingOutside|NetworkAsk|AllowList|PrivateDestinations|SNIMismatch|Transparent|TUN|ForkBomb|ProcessLimit|ConcurrentRuns|DirectStartMatchesInitStage" >>"$nolandlock"
done
echo "nolandlock-user-sandbox $uid - sandbox sandbox.test -test.v -test.count=1 -test.run Landlock|Secrets|Writes|Protected|Identity|Invisible|Symlink" >>"$nolandlock"
for f in "$plan" "$nolandlock"; do
	if [ -n "${MOAT_VMTEST_STEPS:-}" ]; then
		grep -E "^[^ ]*(${MOAT_VMTEST_STEPS})[^ ]* " "$f" >"$f.only" || true
		mv "$f.only" "$f"
	fi
	if [ -n "${MOAT_VMTEST_RUN:-}" ]; then
		sed -i "s/\$/ -test.run ${MOAT_VMTEST_RUN//\//\\/}/" "$f"
	fi
done
chmod -R a+rX "$work/bin"
steps=$(grep -c . "$plan" || true)
steps_nolandlock=$(grep -c . "$nolandlock" || true)
if [ "$steps" -eq 0 ] && [ "$steps_nolandlock" -eq 0 ]; then
	echo "vmtest: no step matches MOAT_VMTEST_STEPS=$MOAT_VMTEST_STEPS" >&2
	exit 2
fi

truncate -s 8G "$work/tmp.img"
log="$work/console.log"

# boot APPEND runs the guest to its end, with APPEND added to the kernel
# command line. Every test prints as it goes (-test.v), and none is silent
# for more than ~30 s, so a guest that prints nothing for $stall seconds is
# stuck, and boot stops it and returns 3. (Seen once in many runs: the
# emulated guest wedged, Go's own test timeout never fired.) A test that
# hangs does not get that far: the guest's init sends SIGQUIT to a step
# quiet for 180 s, which prints its goroutines' stacks and fails the step.
stall="${MOAT_VMTEST_STALL:-240}"
boot() {
	timeout "${MOAT_VMTEST_TIMEOUT:-3000}" qemu-system-x86_64 \
		-accel tcg,thread=multi -cpu max -smp 2 -m 4G \
		-nographic -no-reboot -monitor none -serial stdio \
		-kernel "$kdir/boot/vmlinuz-$kver" -initrd "$work/initrd.gz" \
		-append "console=ttyS0 cgroup_no_v1=all panic=-1 quiet $1" \
		-drive "file=$work/tmp.img,if=virtio,format=raw" \
		-virtfs "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap" \
		-virtfs "local,path=$work/bin,mount_tag=bin,security_model=none,readonly=on" \
		-virtfs "local,path=$PWD,mount_tag=src,security_model=none,readonly=on" \
		</dev/null >"$log" 2>&1 &
	qpid=$!
	local size=-1 quiet=0 status=0
	while kill -0 "$qpid" 2>/dev/null; do
		sleep 5
		local now
		now=$(stat -c %s "$log")
		if [ "$now" != "$size" ]; then size=$now quiet=0; else quiet=$((quiet + 5)); fi
		if [ "$quiet" -ge "$stall" ]; then
			stopguest
			return 3
		fi
	done
	wait "$qpid" || status=$?
	qpid=
	return "$status"
}

# guest STEPS PLAN APPEND: boots the guest on a clean /tmp disk, with
# APPEND on the kernel command line, and checks that all STEPS steps of
# PLAN passed. A guest that stalls is booted once more, on a clean disk,
# for the steps it had not ended: a wedged emulator is not a verdict on
# moat, and the steps that ended need not take their time again. A second
# stall in a row is reported as a failure.
guest() {
	local steps=$1 planfile=$2 status=0 failed_before=0
	mkfs.ext4 -q -F "$work/tmp.img"
	boot "$3" || status=$?
	if [ "$status" -eq 3 ]; then
		quiet "$log"
		tr -d '\r' <"$log" | tail -n 30
		echo "vmtest: the guest printed nothing for ${stall}s and was stopped; booting it once more for the steps it had not ended"
		failed_before=$(tr -d '\r' <"$log" | grep -ac '^vmtest: --- FAIL step ' || true)
		{
			echo '-'
			tr -d '\r' <"$log" | grep -aE '^vmtest: --- (ok|FAIL) step ' | awk '{print $5}'
		} >"$work/ended"
		awk 'NR == FNR { ended[$1] = 1; next } !($1 in ended)' "$work/ended" "$planfile" >"$planfile.rest"
		mv "$planfile.rest" "$planfile"
		steps=$(grep -c . "$planfile" || true)
		status=0
		if [ "$steps" -gt 0 ]; then
			mkfs.ext4 -q -F "$work/tmp.img"
			boot "$3" || status=$?
		else
			echo "vmtest: $steps passed, 0 failed" >"$log"
		fi
	fi
	quiet "$log"
	if [ "$status" -ne 0 ]; then
		echo "vmtest: QEMU exited with status $status (3: the guest stalled; 124: it ran out of time)"
		return 1
	fi
	# grep reads to the end (no -q): one that stopped at the line would
	# end tr's writes with SIGPIPE, which pipefail takes for a failure.
	if [ "$failed_before" -ne 0 ] || ! tr -d '\r' <"$log" | grep -x "vmtest: $steps passed, 0 failed" >/dev/null; then
		echo "vmtest: not every step passed"
		return 1
	fi
}

# quiet LOG prints the guest's output without the noise of passing tests,
# but for those that took 10 s or more: where the guest's time goes.
quiet() {
	tr -d '\r' <"$1" | awk '
		/^=== (RUN|PAUSE|CONT|NAME)/ { next }
		/^[[:space:]]*--- PASS/ { d = $NF; gsub(/[()s]/, "", d); if (d + 0 < 10) next }
		{ print }' || true
}

failed=0
if [ "$steps" -gt 0 ]; then
	echo "== guest: $pkg, cgroup v2 only, $steps steps"
	guest "$steps" "$plan" "" || failed=1
fi
if [ "$steps_nolandlock" -gt 0 ]; then
	# Debian's CONFIG_LSM less landlock: the kernel then has no Landlock,
	# as on a distribution that does not enable it.
	echo "== guest: $pkg, cgroup v2 only, no Landlock, $steps_nolandlock steps"
	guest "$steps_nolandlock" "$nolandlock" "lsm=lockdown,yama,loadpin,safesetid,integrity,apparmor,bpf moat.plan=plan-nolandlock moat.landlock=absent" || failed=1
fi
exit "$failed"
