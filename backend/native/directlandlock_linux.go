package native

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/moatbox/moat/backend"
)

// Landlock for the direct start. go-landlock (which the init stage uses,
// landlock_linux.go) opens the rules' paths and makes its system calls
// from Go, which the direct start's child cannot run; so the rights are
// worked out here, on the host, the way go-landlock's best-effort mode
// works them out (restrictLandlock's rules, downgraded to this kernel's
// ABI with go-landlock's own table of ABIs, its V1..V10 presets), and the
// child only opens each path and adds the rule.
// TestDirectStartMatchesInitStage compares what the two allow.

// landlockByABI is go-landlock's preset for each ABI up to the newest
// the init stage asks for (landlockConfig, landlockMaxABI), by ABI.
var landlockByABI = [landlockMaxABI + 1]landlock.Config{
	1: landlock.V1, 2: landlock.V2, 3: landlock.V3, 4: landlock.V4, 5: landlock.V5,
	6: landlock.V6, 7: landlock.V7, 8: landlock.V8, 9: landlock.V9, 10: landlock.V10,
}

// landlockFor is what go-landlock's best effort makes of landlockConfig
// on a kernel with the given ABI: the rights and scopes both handle.
func landlockFor(abi int) (fs, scoped uint64) {
	k := landlockByABI[min(max(abi, 0), landlockMaxABI)]
	return uint64(k.HandledAccessFS & landlockConfig.HandledAccessFS), uint64(k.Scoped & landlockConfig.Scoped)
}

// landlockRule is one path rule with its rights before downgrading. A
// rule for a file (file set) holds file rights only: the kernel refuses
// directory rights on a file with EINVAL.
type landlockRule struct {
	path          string
	access        uint64
	ignoreMissing bool
	file          bool
}

const (
	llRead     = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	llWrite    = ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSTruncate
	llRWExtras = ll.AccessFSRefer | ll.AccessFSIoctlDev | ll.AccessFSResolveUnix
	// llFile is the rights that apply to a file rather than a directory
	// (the kernel's ACCESS_FILE).
	llFile = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// landlockRules are the path rules for spec, for both starts: the
// directory listing of "/" first, then one per mount that is granted
// (see restrictLandlock, which hands them to go-landlock). onHost says
// where it runs, which decides where a bind's file is seen: at its
// Source on the host (the direct start plans there), at its Target
// inside the sandbox (init).
func landlockRules(spec *backend.Spec, onHost bool) []landlockRule {
	rules := []landlockRule{{path: "/", access: ll.AccessFSReadDir}}
	for _, m := range spec.Mounts {
		if m.NoLandlockGrant {
			continue
		}
		switch m.Kind {
		case backend.MountBind, backend.MountOverlay, backend.MountTmpfs, backend.MountProc, backend.MountDev:
			r := landlockRule{path: m.Target, access: llRead | llWrite | llRWExtras, ignoreMissing: true}
			if m.ReadOnly {
				r.access = llRead
			}
			// Only a bind can be a file (--ro FILE, --rw FILE).
			seen := m.Target
			if onHost {
				seen = m.Source
			}
			if m.Kind == backend.MountBind && isFile(seen) {
				r.access &= llFile
				r.file = true
			}
			rules = append(rules, r)
		case backend.MountFile:
			// Read where no granted tree holds it already: a file at
			// the end of /etc's links, such as systemd-resolved's
			// /run/systemd/resolve/stub-resolv.conf (sandbox.fileTarget).
			if !grantedTree(spec.Mounts, m.Target) {
				rules = append(rules, landlockRule{path: m.Target, access: llRead & llFile, file: true, ignoreMissing: true})
			}
		}
	}
	return rules
}

// grantedTree says whether a mount landlockRules grants holds target.
func grantedTree(mounts []backend.Mount, target string) bool {
	for _, m := range mounts {
		switch m.Kind {
		case backend.MountBind, backend.MountOverlay, backend.MountTmpfs:
			if !m.NoLandlockGrant && (target == m.Target || strings.HasPrefix(target, strings.TrimSuffix(m.Target, "/")+"/")) {
				return true
			}
		}
	}
	return false
}

// isFile reports whether path exists and is not a directory.
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// landlockAttr is struct landlock_ruleset_attr.
type landlockAttr struct{ fs, net, scoped uint64 }

// landlockPathAttr is struct landlock_path_beneath_attr (packed).
type landlockPathAttr struct {
	access uint64
	fd     int32
}

// landlockNetAttr is struct landlock_net_port_attr.
type landlockNetAttr struct{ access, port uint64 }

// landlock adds the steps that restrict init (and so the command) with
// Landlock, for a kernel with the given ABI.
func (p *plan) landlock(spec *backend.Spec, abi int) error {
	n := spec.Network
	if (n.RestrictBind || n.RestrictConnect) && abi < 4 {
		return fmt.Errorf("landlock: TCP port rules need Landlock ABI 4 (Linux 6.7); this kernel has %d", max(abi, 0))
	}
	attr := &landlockAttr{}
	attr.fs, attr.scoped = landlockFor(abi)
	if n.RestrictBind {
		attr.net |= ll.AccessNetBindTCP
	}
	if n.RestrictConnect {
		attr.net |= ll.AccessNetConnectTCP
	}
	rules := landlockRules(spec, true)
	// go-landlock's best effort: a rule asking for "refer" on a kernel
	// that cannot handle it (ABI 1) downgrades to no Landlock at all.
	for _, r := range rules {
		if r.access&ll.AccessFSRefer != 0 && attr.fs&ll.AccessFSRefer == 0 {
			return nil
		}
	}
	if attr.fs == 0 && attr.net == 0 && attr.scoped == 0 {
		return nil // no Landlock on this kernel: nothing to restrict
	}
	stg := p.stage("landlock")
	rs := p.val()
	i := p.call(stg, unix.SYS_LANDLOCK_CREATE_RULESET, mem(p, attr), unsafe.Sizeof(*attr), 0)
	p.at(i).save = rs
	for _, r := range rules {
		access := r.access & attr.fs
		if access == 0 {
			continue
		}
		g := uint16(0)
		if r.ignoreMissing {
			g = p.newGroup()
		}
		fd := p.val()
		i := p.call(stg, unix.SYS_OPENAT, atFDCWD, p.str(r.path), unix.O_PATH|unix.O_CLOEXEC)
		p.at(i).save, p.at(i).group = fd, g
		if r.ignoreMissing {
			p.at(i).skip = uint16(unix.ENOENT)
		}
		pa := &landlockPathAttr{access: access}
		*p.list = append(*p.list, step{kind: kindPoke32, p: unsafe.Pointer(&pa.fd), a: [6]uintptr{1: uintptr(fd)}, stage: stg, group: g})
		i = p.call(stg, unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), unix.LANDLOCK_RULE_PATH_BENEATH, mem(p, pa), 0)
		p.at(i).ref, p.at(i).group = 1, g
		i = p.call(stg, unix.SYS_CLOSE, uintptr(fd))
		p.at(i).ref, p.at(i).group = 1, g
	}
	addPort := func(access uint64, ports []int) {
		for _, port := range ports {
			na := &landlockNetAttr{access: access, port: uint64(port)}
			i := p.call(stg, unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), landlockRuleNetPort, mem(p, na), 0)
			p.at(i).ref = 1
		}
	}
	if n.RestrictBind {
		addPort(ll.AccessNetBindTCP, n.BindPorts)
	}
	if n.RestrictConnect {
		addPort(ll.AccessNetConnectTCP, n.ConnectPorts)
	}
	i = p.call(stg, unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs), 0)
	p.at(i).ref = 1
	i = p.call(stg, unix.SYS_CLOSE, uintptr(rs))
	p.at(i).ref = 1
	return nil
}

// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT, which x/sys/unix lacks.
const landlockRuleNetPort = 2
