package policy

import (
	"bytes"
	"encoding/json"
	"maps"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Policy is everything a user can say about one run. The zero value is not
// useful: start from [Default], [Parse] or [Load].
//
// A Policy is plain data. Fields may be changed directly, or by a run's
// options ([Overrides.Apply], which marks each with [Policy.MarkFlag]);
// call [Policy.Resolve] and [Policy.Validate] after the last change.
type Policy struct {
	Workspace  Workspace  `toml:"workspace" json:"workspace"`
	Filesystem Filesystem `toml:"filesystem" json:"filesystem"`
	Env        Env        `toml:"env" json:"env"`
	Network    Network    `toml:"network" json:"network"`
	Limits     Limits     `toml:"limits" json:"limits"`
	Syscalls   Syscalls   `toml:"syscalls" json:"syscalls"`
	User       User       `toml:"user" json:"user"`
	Harness    Harness    `toml:"harness" json:"harness"`
	Budgets    Budgets    `toml:"budgets" json:"budgets"`
	Sandbox    Sandbox    `toml:"sandbox" json:"sandbox"`
	// Rules are the [[rules]] entries, in file order (see Rule). Default [].
	Rules []Rule `toml:"rules" json:"rules"`
	// Secrets are the [[secrets]] entries: credentials the proxy adds to
	// requests to their hosts (see Secret). Default [].
	Secrets []Secret `toml:"secrets" json:"secrets"`

	// Source is the file the policy was loaded from, as given to Load or
	// Parse; "" for the built-in default. Relative paths in the policy are
	// relative to its directory.
	Source string `toml:"-" json:"source,omitempty"`

	// lines maps a dotted key ("limits.memory", "filesystem.read_only[2]",
	// "env.set.HOME") to the 1-based line of Source it was written on.
	lines map[string]int
	// flags maps a dotted key to the CLI flag that set it.
	flags map[string]string
	// loaded holds the content of the files Trust.Load checked, by path
	// (see ReadFile).
	loaded map[string][]byte
	// programs holds the digests of the programs and their argument
	// files Trust.Load checked, by path, "" for an argument that was no
	// file then (see VerifyPrograms).
	programs map[string]string
}

// Workspace is the directory the command works on. It is mounted at the same
// absolute path inside the sandbox.
type Workspace struct {
	// Path of the workspace. Default ".": the directory of the policy file,
	// or the current directory for the built-in policy and for a path given
	// by a flag. Resolve makes it absolute.
	Path string `toml:"path" json:"path"`
	// Mode is how the command sees the workspace. Default "direct".
	//   direct    the command writes to the real directory
	//   readonly  the command cannot write to it
	//   overlay   writes go to a copy-on-write layer, reviewed with moat diff
	//   copy      like overlay, on a full copy of the workspace (for hosts
	//             where overlayfs cannot be mounted)
	Mode string `toml:"mode" json:"mode"`
	// Protect lists paths, relative to the workspace, that host tools
	// execute or read as configuration, in addition to the built-in list
	// (the git directory's config, hooks and indirections, .gitmodules,
	// .envrc, editor, agent, npm, yarn, cargo and mercurial settings: see
	// the README), which cannot be turned off. In direct mode they stay
	// read-only inside, the directories above them cannot be renamed, and
	// one the command creates is moved to a quarantine after the run;
	// moat apply refuses changes to them without --force. Default [].
	// Absolute entries and entries escaping the workspace are errors.
	Protect []string `toml:"protect" json:"protect"`
}

// Workspace modes.
const (
	WorkspaceDirect   = "direct"
	WorkspaceReadOnly = "readonly"
	WorkspaceOverlay  = "overlay"
	WorkspaceCopy     = "copy"
)

// Filesystem is the view of the host outside the workspace. Inside, $HOME is
// an empty tmpfs and everything not listed here does not exist. Entries must
// be absolute or start with "~/" (the home directory of the user running
// moat); Resolve expands "~/".
type Filesystem struct {
	// ReadOnly lists host paths visible read-only. Default ["/usr", "/bin",
	// "/sbin", "/lib", "/lib64", "/etc"].
	ReadOnly []string `toml:"read_only" json:"read_only"`
	// ReadWrite lists extra host paths visible and writable, such as
	// "~/.cache/pip". Default [].
	ReadWrite []string `toml:"read_write" json:"read_write"`
	// Deny lists host paths hidden even when under a visible path. Default
	// ["/etc/shadow", "/etc/gshadow"].
	Deny []string `toml:"deny" json:"deny"`
	// Landlock is the second wall around file access. Default "auto".
	//   auto         applied where the kernel has Landlock; the report warns
	//                when it has none
	//   required     refuse to run on a kernel without Landlock
	//   best-effort  applied where the kernel has it, silently otherwise
	//   off          not applied (the report warns)
	Landlock string `toml:"landlock" json:"landlock"`
}

// Landlock settings.
const (
	LandlockAuto       = "auto"
	LandlockRequired   = "required"
	LandlockBestEffort = "best-effort"
	LandlockOff        = "off"
)

// Env is the environment of the command. Nothing of moat's own environment
// reaches it unless listed in Pass.
type Env struct {
	// Pass lists patterns (path.Match syntax, e.g. "LC_*") of variable
	// names passed through from moat's environment. Default ["PATH", "LANG",
	// "LC_*", "TERM", "TZ"].
	Pass []string `toml:"pass" json:"pass"`
	// Set lists variables set inside, overriding passed ones. Default
	// {HOME = "/home/agent", USER = "agent"}. Unlike lists, a table given in
	// a file is merged into the default: keys it does not mention keep their
	// default values.
	Set map[string]string `toml:"set" json:"set"`
}

// Network is what the command can reach.
type Network struct {
	// Mode is "none" (no network at all, the default), "allow" (only the
	// destinations in Allow, through moat's proxy) or "host" (the host's
	// network, unfiltered).
	Mode string `toml:"mode" json:"mode"`
	// Allow lists destinations reachable in allow mode: "host", "*.domain"
	// or either with ":port". Default [].
	Allow []string `toml:"allow" json:"allow"`
	// Deny lists destinations refused even when Allow matches. Default [].
	Deny []string `toml:"deny" json:"deny"`
	// AllowCIDRs lists address ranges (e.g. "10.1.2.0/24") reachable even
	// though private addresses and the host's own are refused by default.
	// Default [].
	AllowCIDRs []string `toml:"allow_cidrs" json:"allow_cidrs"`
	// HTTPSOnly refuses plain-HTTP requests and tunnels that do not start
	// with TLS, in allow mode. Default false.
	HTTPSOnly bool `toml:"https_only" json:"https_only"`
	// Transparent gives programs that ignore the proxy variables the same
	// allowlist in allow mode: a TUN device in the sandbox's network
	// namespace, moat's resolver, and the proxy's decisions for every TCP
	// connection. Default true; false leaves allow mode to the proxy
	// variables alone (a run then starts slightly faster).
	Transparent bool `toml:"transparent" json:"transparent"`
	// TCPBind and TCPConnect, when set, are the only TCP ports the
	// command may bind (listen on) and connect to, enforced by Landlock
	// (ABI 4 or later; a kernel without it refuses the run). Unset (the
	// default), Landlock leaves TCP alone: in none and allow modes the
	// network namespace is the wall, and servers a command starts on
	// loopback for its own tests keep working. An empty list allows no
	// port at all. In allow mode the proxy's port is always connectable.
	// Port 0 in TCPBind allows binding to an ephemeral port.
	TCPBind    *[]int `toml:"tcp_bind,omitempty" json:"tcp_bind,omitempty"`
	TCPConnect *[]int `toml:"tcp_connect,omitempty" json:"tcp_connect,omitempty"`
}

// Network modes.
const (
	NetworkNone  = "none"
	NetworkAllow = "allow"
	NetworkHost  = "host"
)

// Limits bound what one run may spend. A zero value means "no limit". The
// defaults are only what every host can enforce (rlimits, the wall clock,
// output); the cgroup limits (Memory, Pids, CPUs) are unset by default, and
// when set on a host that cannot enforce them, the run is refused.
type Limits struct {
	// Wall is the wall-clock time after which the run is killed. Default 10m.
	Wall Duration `toml:"wall" json:"wall"`
	// CPU is the CPU time of each process (RLIMIT_CPU). Default 5m.
	CPU Duration `toml:"cpu" json:"cpu"`
	// OpenFiles is the maximum number of open files per process
	// (RLIMIT_NOFILE). Default 4096; at least 32, at most 1<<20.
	OpenFiles int64 `toml:"open_files" json:"open_files"`
	// FileSize is the largest file a process may write (RLIMIT_FSIZE).
	// Default 1GiB.
	FileSize Size `toml:"file_size" json:"file_size"`
	// Output bounds stdout and stderr together; the run is killed when it
	// writes more. Default 16MiB.
	Output Size `toml:"output" json:"output"`
	// Memory is the cgroup memory limit. Default unset; at least 1MiB.
	Memory Size `toml:"memory" json:"memory"`
	// Pids bounds the number of processes and threads of the run: a
	// cgroup limit where the caller has a cgroup, else RLIMIT_NPROC in
	// the sandbox's own user namespace (Linux 5.14 and later). Default
	// unset.
	Pids int64 `toml:"pids" json:"pids"`
	// CPUs is the cgroup CPU quota in CPUs, e.g. 1.5. Default unset; at most
	// 1024.
	CPUs float64 `toml:"cpus" json:"cpus"`
	// Disk bounds what a run may write to /tmp, home, /dev/shm and an
	// overlay workspace, together (one tmpfs). A writable direct or copy
	// workspace, or read_write paths, are written in place on the host,
	// beyond it: the run is refused then, unless degraded runs are allowed
	// or the directory is on a tmpfs no larger than the limit.
	// Default unset; at least 1MiB.
	Disk Size `toml:"disk" json:"disk"`
}

// Syscalls selects the seccomp filter.
type Syscalls struct {
	// Profile is "default" (the built-in profile, the default), "strict",
	// "unconfined" (no filter), or the path of a Docker-format JSON profile,
	// relative to the policy file's directory.
	Profile string `toml:"profile" json:"profile"`
}

// Sandbox selects what isolates the command. Every isolation enforces the
// whole policy or refuses the run, naming what it cannot enforce.
type Sandbox struct {
	// Isolation is "native" (the default: Linux namespaces, seccomp and
	// Landlock, on the host's kernel) or "gvisor" (the command runs on
	// gVisor's kernel in user space, runsc: a kernel bug is no longer one
	// step from the host; needs root, and refuses what it cannot enforce).
	Isolation string `toml:"isolation" json:"isolation"`
	// Runsc is the runsc binary gvisor isolation runs, an absolute path.
	// Default "": $MOAT_RUNSC, the cache scripts/runsc.sh builds into,
	// then runsc on PATH.
	Runsc string `toml:"runsc" json:"runsc,omitempty"`
}

// Isolations.
const (
	IsolationNative = "native"
	IsolationGVisor = "gvisor"
)

// Built-in seccomp profiles.
const (
	ProfileDefault    = "default"
	ProfileStrict     = "strict"
	ProfileUnconfined = "unconfined"
)

// User is who the command runs as. It never runs as root, inside or outside.
type User struct {
	// UID is the user id inside the sandbox. Default 1000; never 0.
	UID int `toml:"uid" json:"uid"`
	// GID is the group id inside the sandbox. Default 1000; never 0.
	GID int `toml:"gid" json:"gid"`
	// HostUID is the host user id the command runs as when moat runs as
	// root. Default 2000000000, an id no account uses; never 0.
	HostUID int `toml:"host_uid" json:"host_uid"`
	// HostGID is the host group id, as HostUID. Default 2000000000.
	HostGID int `toml:"host_gid" json:"host_gid"`
}

// DefaultHostID is the default host user and group id of the command when
// moat runs as root: high enough that no account or file on the host owns it.
const DefaultHostID = 2000000000

// Default returns the built-in policy, every field set to its documented
// default. Each call returns a new Policy that the caller may modify.
func Default() *Policy {
	return &Policy{
		Workspace: Workspace{
			Path:    ".",
			Mode:    WorkspaceDirect,
			Protect: []string{},
		},
		Filesystem: Filesystem{
			ReadOnly:  []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"},
			ReadWrite: []string{},
			Deny:      []string{"/etc/shadow", "/etc/gshadow"},
			Landlock:  LandlockAuto,
		},
		Env: Env{
			Pass: []string{"PATH", "LANG", "LC_*", "TERM", "TZ"},
			Set:  map[string]string{"HOME": "/home/agent", "USER": "agent"},
		},
		Network: Network{
			Mode:        NetworkNone,
			Allow:       []string{},
			Deny:        []string{},
			AllowCIDRs:  []string{},
			Transparent: true,
		},
		Limits: Limits{
			Wall:      Duration(10 * time.Minute),
			CPU:       Duration(5 * time.Minute),
			OpenFiles: 4096,
			FileSize:  1 * GiB,
			Output:    16 * MiB,
		},
		Syscalls: Syscalls{Profile: ProfileDefault},
		Sandbox:  Sandbox{Isolation: IsolationNative},
		User: User{
			UID:     1000,
			GID:     1000,
			HostUID: DefaultHostID,
			HostGID: DefaultHostID,
		},
		Harness: Harness{Builtin: []string{BuiltinIrreversible}},
		Rules:   []Rule{},
		Secrets: []Secret{},
	}
}

// MarkFlag records that the dotted field (e.g. "limits.memory") was set by the
// command-line flag (e.g. "--memory"), so that an error about it, or about an
// element of it, names the flag rather than a line of the policy file.
func (p *Policy) MarkFlag(field, flag string) {
	if p.flags == nil {
		p.flags = make(map[string]string)
	}
	p.flags[field] = flag
}

// TOML renders the effective policy as a TOML document that Parse reads back
// to the same policy. Sizes and durations are written in their canonical
// string forms; zero means unset.
func (p *Policy) TOML() ([]byte, error) {
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Clone returns a deep copy of p that keeps what a copy through JSON
// loses: where each key was written (its rules' lines, for the names a
// decision gives them), the flags that set keys, and what Trust.Load
// checked.
func (p *Policy) Clone() *Policy {
	b, err := json.Marshal(p)
	if err != nil {
		panic("policy: a policy that does not marshal: " + err.Error()) // every field is plain data
	}
	var q Policy
	if err := json.Unmarshal(b, &q); err != nil {
		panic("policy: a policy that does not unmarshal: " + err.Error())
	}
	q.lines, q.flags, q.loaded, q.programs = maps.Clone(p.lines), maps.Clone(p.flags), maps.Clone(p.loaded), maps.Clone(p.programs)
	return &q
}
