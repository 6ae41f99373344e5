package seccomp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/moatbox/moat/internal/suggest"
)

// This file loads the seccomp profiles of Docker and the OCI runtime spec
// (the format of moby's profiles/seccomp/default.json).

// Target is the sandbox whose point of view a Docker profile's conditional
// rules (includes and excludes) are evaluated from.
type Target struct {
	Arch   string        // ArchX86_64 or ArchAarch64
	Kernel KernelVersion // of the running kernel; the zero value matches no minKernel
	Caps   []string      // capabilities of the command ("CAP_SYS_ADMIN"); moat's has none
}

// KernelVersion is a kernel's major and minor version, as Docker's minKernel
// compares them ("4.8").
type KernelVersion struct{ Major, Minor int }

func (k KernelVersion) String() string { return fmt.Sprintf("%d.%d", k.Major, k.Minor) }

func (k KernelVersion) atLeast(m KernelVersion) bool {
	return k.Major > m.Major || k.Major == m.Major && k.Minor >= m.Minor
}

// HostTarget is moat's command on this host: the native architecture, the
// running kernel, and no capabilities.
func HostTarget() Target {
	return Target{Arch: NativeArch(), Kernel: kernelVersion()}
}

// Docker is a Docker-format profile as loaded for one Target.
type Docker struct {
	Profile *Profile
	// Arches are the SCMP_ARCH_* names the file lists for the target (from
	// architectures, or the archMap entry of the target's architecture).
	// moat filters the target's own architecture only and kills system
	// calls of every other one, whatever the file lists.
	Arches []string
	// Dropped describes the rules left out because their includes or
	// excludes do not hold for the target.
	Dropped []string
	// Skipped are system-call names that exist on some Linux architecture
	// but not on the target's.
	Skipped []string
}

// LoadDocker parses a Docker-format profile for moat's command on this host
// (see HostTarget); name is the file name its errors start with.
func LoadDocker(name string, data []byte) (*Profile, error) {
	d, err := ParseDocker(name, data, HostTarget())
	if err != nil {
		return nil, err
	}
	return d.Profile, nil
}

// ParseDocker parses a Docker-format profile for t. Every problem is
// reported at once, each on a line starting with name and the position: the
// line and column for invalid JSON, the JSON path for a wrong value
// ("p.json: syscalls[3].args[0].index: 7 is above 5").
//
// The fields are those of Docker and the OCI runtime spec: defaultAction,
// defaultErrnoRet, architectures or archMap, flags, and syscalls with names
// (or the older name), action, errnoRet, args (index, value, valueTwo, op),
// comment, includes and excludes (caps, arches, minKernel). Unknown fields
// are errors, since a misspelt one (say "arg") would silently widen a rule.
// SCMP_ACT_TRACE and SCMP_ACT_NOTIFY are refused: moat runs no tracer or
// notification listener. SCMP_ACT_KILL is SCMP_ACT_KILL_THREAD, as in
// libseccomp. Names that exist on other architectures only are skipped; a
// name that exists on none is an error.
func ParseDocker(name string, data []byte, t Target) (*Docker, error) {
	if table(t.Arch) == nil {
		return nil, fmt.Errorf("%s: seccomp filters are not compiled for architecture %q", name, t.Arch)
	}
	root, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	l := &loader{t: t, out: &Docker{Profile: &Profile{Arches: []string{t.Arch}}}}
	l.profile(root)
	slices.Sort(l.out.Skipped)
	l.out.Skipped = slices.Compact(l.out.Skipped)
	if len(l.errs) > 0 {
		const most = 20
		lines := l.errs
		if len(lines) > most {
			lines = append(lines[:most:most], fmt.Sprintf("... and %d more problems", len(l.errs)-most))
		}
		for i := range lines {
			lines[i] = name + ": " + lines[i]
		}
		return nil, errors.New(strings.Join(lines, "\n"))
	}
	return l.out, nil
}

// decodeJSON parses data into maps, slices, strings, json.Numbers, bools and
// nils, and turns a syntax error's byte offset into a line and column. A key
// given twice in one object is an error: encoding/json would keep the last
// value, so that a second "defaultAction" silently overrode the first.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, data, "", 0)
	if err == nil {
		// Only white space may follow the profile.
		if rest := bytes.TrimSpace(data[dec.InputOffset():]); len(rest) > 0 {
			off := len(data) - len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"))
			return nil, fmt.Errorf("%s: unexpected data after the profile", lineCol(data, off))
		}
		return v, nil
	}
	var dup *duplicateKeyError
	if errors.As(err, &dup) {
		return nil, err
	}
	// The token walk's syntax errors point at the offending byte or just
	// after it, depending on where it was found; decoding whole, once more
	// on the way out, gives one position rule.
	if errors.Is(err, io.EOF) && len(bytes.TrimSpace(data)) > 0 {
		err = io.ErrUnexpectedEOF
	} else if !errors.Is(err, io.EOF) {
		var v any
		if e := json.NewDecoder(bytes.NewReader(data)).Decode(&v); e != nil {
			err = e
		}
	}
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return nil, errors.New("empty file: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("%s: unexpected end of file", lineCol(data, len(data)))
	case errors.As(err, &syn):
		// The error is in the byte before Offset.
		off := max(int(syn.Offset)-1, 0)
		return nil, fmt.Errorf("%s: invalid JSON: %s", lineCol(data, off), strings.TrimPrefix(syn.Error(), "json: "))
	}
	return nil, fmt.Errorf("invalid JSON: %w", err)
}

// duplicateKeyError is a key given twice in one JSON object.
type duplicateKeyError struct{ msg string }

func (e *duplicateKeyError) Error() string { return e.msg }

// decodeValue reads the next JSON value from dec, token by token, so that
// each object's keys can be checked as they come: every key is looked up
// once in its object's map, which keeps the walk linear in the input.
// path is the value's JSON path, for errors.
// maxDepth bounds how deep a profile's arrays and objects nest (a Docker
// profile nests four levels): a file of 20,000 brackets took hundreds of
// megabytes to read, each level's path longer than the last.
const maxDepth = 32

// decodeValue reads the value at path (for messages only, cut short past
// a bound), depth arrays and objects deep.
func decodeValue(dec *json.Decoder, data []byte, path string, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') && depth >= maxDepth {
		return nil, fmt.Errorf("%s: nested more than %d levels deep; a profile needs a few", lineCol(data, int(dec.InputOffset())), maxDepth)
	}
	switch tok {
	case json.Delim('{'):
		m := map[string]any{}
		first := map[string]int64{} // where each key ends, for the error
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := tok.(string) // Token refuses any other key
			end := dec.InputOffset()
			if at, ok := first[key]; ok {
				return nil, &duplicateKeyError{fmt.Sprintf("%s: %s: the key is given twice in one object (first at %s); JSON keeps only one of them, so remove the other",
					lineCol(data, int(end-int64(len(key))-2)), join(path, key), lineCol(data, int(at-int64(len(key))-2)))}
			}
			first[key] = end
			v, err := decodeValue(dec, data, join(path, key), depth+1)
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return nil, err
		}
		return m, nil
	case json.Delim('['):
		a := []any{}
		for i := 0; dec.More(); i++ {
			v, err := decodeValue(dec, data, clip(fmt.Sprintf("%s[%d]", path, i)), depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := dec.Token(); err != nil { // the closing bracket
			return nil, err
		}
		return a, nil
	}
	return tok, nil
}

// lineCol is the 1-based line and column of byte off of data.
func lineCol(data []byte, off int) string {
	off = min(off, len(data))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

// Names of the JSON format.
var (
	dockerActions = []string{"SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS",
		"SCMP_ACT_KILL_THREAD", "SCMP_ACT_TRAP", "SCMP_ACT_LOG"}
	dockerActionOf = sync.OnceValue(func() map[string]Action {
		return map[string]Action{"SCMP_ACT_ALLOW": Allow, "SCMP_ACT_ERRNO": Errno, "SCMP_ACT_KILL": KillThread,
			"SCMP_ACT_KILL_PROCESS": KillProcess, "SCMP_ACT_KILL_THREAD": KillThread, "SCMP_ACT_TRAP": Trap, "SCMP_ACT_LOG": Log}
	})
	dockerOps  = []string{"SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE", "SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_MASKED_EQ"}
	dockerOpOf = sync.OnceValue(func() map[string]Op {
		return map[string]Op{"SCMP_CMP_NE": NE, "SCMP_CMP_LT": LT, "SCMP_CMP_LE": LE, "SCMP_CMP_EQ": EQ,
			"SCMP_CMP_GE": GE, "SCMP_CMP_GT": GT, "SCMP_CMP_MASKED_EQ": MaskedEQ}
	})

	// libseccomp's architecture names; the two moat compiles for map to
	// its own.
	scmpArches = sync.OnceValue(func() map[string]string {
		return map[string]string{"SCMP_ARCH_X86_64": ArchX86_64, "SCMP_ARCH_AARCH64": ArchAarch64,
			"SCMP_ARCH_X86": "", "SCMP_ARCH_X32": "", "SCMP_ARCH_ARM": "", "SCMP_ARCH_LOONGARCH64": "", "SCMP_ARCH_M68K": "",
			"SCMP_ARCH_MIPS": "", "SCMP_ARCH_MIPS64": "", "SCMP_ARCH_MIPS64N32": "", "SCMP_ARCH_MIPSEL": "",
			"SCMP_ARCH_MIPSEL64": "", "SCMP_ARCH_MIPSEL64N32": "", "SCMP_ARCH_PPC": "", "SCMP_ARCH_PPC64": "",
			"SCMP_ARCH_PPC64LE": "", "SCMP_ARCH_S390": "", "SCMP_ARCH_S390X": "", "SCMP_ARCH_PARISC": "",
			"SCMP_ARCH_PARISC64": "", "SCMP_ARCH_RISCV64": "", "SCMP_ARCH_SH": "", "SCMP_ARCH_SHEB": ""}
	})

	// Docker's names in includes.arches and excludes.arches (Go's GOARCH
	// spelt the way Docker does), and the one of each target.
	dockerArchNames = []string{"x86", "amd64", "x32", "arm", "arm64", "loongarch64", "mips", "mipsel", "mips64",
		"mips64n32", "mipsel64", "mipsel64n32", "mips3l64n32", "ppc", "ppc64", "ppc64le", "riscv64", "s390", "s390x"}
	dockerArchOf = sync.OnceValue(func() map[string]string {
		return map[string]string{ArchX86_64: "amd64", ArchAarch64: "arm64"}
	})

	dockerFlags = []string{"SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG", "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
		"SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"}

	// armPrivateNames are ARM's private system calls (__ARM_NR_*), which
	// libseccomp knows by name and golang.org/x/sys does not.
	armPrivateNames = sync.OnceValue(func() map[string]bool {
		return map[string]bool{"breakpoint": true, "cacheflush": true, "set_tls": true, "usr26": true, "usr32": true}
	})
)

type loader struct {
	t    Target
	out  *Docker
	errs []string
	// plain holds each system call's first rule without conditions, by
	// name: its path and what it does.
	plain map[string]plainRule
}

// plainRule is a rule without conditions, as one name of it is checked
// against the next for that name.
type plainRule struct {
	path   string
	action Action
	errno  uint32
}

func (l *loader) errorf(path, format string, args ...any) {
	if path == "" {
		path = "top level"
	}
	l.errs = append(l.errs, path+": "+fmt.Sprintf(format, args...))
}

// object checks that v is an object whose keys are all in known.
func (l *loader) object(path string, v any, known ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		l.errorf(path, "want an object, got %s", kind(v))
		return nil, false
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		if c := suggest.Closest(k, known, 2); c != "" {
			l.errorf(join(path, k), "unknown field, did you mean %q? (known: %s)", c, strings.Join(known, ", "))
			continue
		}
		l.errorf(join(path, k), "unknown field (known: %s)", strings.Join(known, ", "))
	}
	return m, true
}

func join(path, key string) string {
	if path == "" {
		return clip(key)
	}
	return clip(path + "." + key)
}

// clip cuts a path for a message short: long keys would make every path
// below them as long.
func clip(path string) string {
	const most = 256
	if len(path) > most {
		return path[:most] + "…"
	}
	return path
}

func kind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + v.String()
	case string:
		return strconv.Quote(v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func (l *loader) str(path string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		l.errorf(path, "want a string, got %s", kind(v))
	}
	return s, ok
}

func (l *loader) strings(path string, v any) []string {
	a, ok := v.([]any)
	if !ok {
		if v != nil { // null is an empty list, as in Go's encoding/json
			l.errorf(path, "want an array of strings, got %s", kind(v))
		}
		return nil
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		if s, ok := l.str(fmt.Sprintf("%s[%d]", path, i), e); ok {
			out = append(out, s)
		}
	}
	return out
}

// uint reads an unsigned integer of at most max.
func (l *loader) uint(path string, v any, max uint64) (uint64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		l.errorf(path, "want a number, got %s", kind(v))
		return 0, false
	}
	u, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil || u > max {
		l.errorf(path, "%s is not an integer from 0 to %d", n, max)
		return 0, false
	}
	return u, true
}

func (l *loader) action(path string, v any) (Action, bool) {
	s, ok := l.str(path, v)
	if !ok {
		return 0, false
	}
	if a, ok := dockerActionOf()[s]; ok {
		return a, true
	}
	switch s {
	case "SCMP_ACT_TRACE":
		l.errorf(path, "SCMP_ACT_TRACE is not supported: no tracer runs in moat's sandbox, and ptrace is refused there")
	case "SCMP_ACT_NOTIFY":
		l.errorf(path, "SCMP_ACT_NOTIFY is not supported: moat runs no seccomp notification listener")
	default:
		l.errorf(path, "unknown action %q (allowed: %s)", s, strings.Join(dockerActions, ", "))
	}
	return 0, false
}

// errnoRet reads the errno of an action, which only SCMP_ACT_ERRNO uses.
func (l *loader) errnoRet(path string, v any, a Action) uint32 {
	n, ok := l.uint(path, v, maxErrno)
	switch {
	case !ok:
		return 0
	case a != Errno && a != 0:
		l.errorf(path, "set, but only SCMP_ACT_ERRNO returns an errno")
	case n == 0:
		l.errorf(path, "0 would make the system call return success without running; use an errno from 1 to %d", maxErrno)
	}
	return uint32(n)
}

func (l *loader) profile(root any) {
	m, ok := l.object("", root, "defaultAction", "defaultErrnoRet", "architectures", "archMap", "flags",
		"listenerPath", "listenerMetadata", "syscalls")
	if !ok {
		return
	}
	p := l.out.Profile
	if v, ok := m["defaultAction"]; ok {
		p.DefaultAction, _ = l.action("defaultAction", v)
	} else {
		l.errorf("defaultAction", "missing (allowed: %s)", strings.Join(dockerActions, ", "))
	}
	if v, ok := m["defaultErrnoRet"]; ok && v != nil {
		p.DefaultErrno = l.errnoRet("defaultErrnoRet", v, p.DefaultAction)
	}
	_, hasArches := m["architectures"]
	_, hasMap := m["archMap"]
	if hasArches && hasMap {
		l.errorf("archMap", "both architectures and archMap are set; use one")
	}
	for i, a := range l.strings("architectures", m["architectures"]) {
		if l.scmpArch(fmt.Sprintf("architectures[%d]", i), a) {
			l.out.Arches = append(l.out.Arches, a)
		}
	}
	l.archMap(m["archMap"])
	for i, f := range l.strings("flags", m["flags"]) {
		if !slices.Contains(dockerFlags, f) {
			l.errorf(fmt.Sprintf("flags[%d]", i), "unknown flag %q (allowed: %s)", f, strings.Join(dockerFlags, ", "))
		}
	}
	if v, ok := m["listenerPath"]; ok {
		if s, ok := l.str("listenerPath", v); ok && s != "" {
			l.errorf("listenerPath", "seccomp notification (SCMP_ACT_NOTIFY) is not supported")
		}
	}
	calls, ok := m["syscalls"].([]any)
	if !ok && m["syscalls"] != nil {
		l.errorf("syscalls", "want an array, got %s", kind(m["syscalls"]))
	}
	for i, c := range calls {
		l.syscall(fmt.Sprintf("syscalls[%d]", i), c)
	}
}

func (l *loader) scmpArch(path, a string) bool {
	ours, ok := scmpArches()[a]
	if !ok {
		l.errorf(path, "unknown architecture %q (e.g. SCMP_ARCH_X86_64, SCMP_ARCH_AARCH64)", a)
	}
	return ours == l.t.Arch
}

// archMap lists, as Docker does, the entry of the target's architecture
// with its sub-architectures.
func (l *loader) archMap(v any) {
	a, ok := v.([]any)
	if !ok {
		if v != nil {
			l.errorf("archMap", "want an array, got %s", kind(v))
		}
		return
	}
	for i, e := range a {
		path := fmt.Sprintf("archMap[%d]", i)
		m, ok := l.object(path, e, "architecture", "subArchitectures")
		if !ok {
			continue
		}
		arch, _ := l.str(join(path, "architecture"), m["architecture"])
		native := l.scmpArch(join(path, "architecture"), arch)
		subs := l.strings(join(path, "subArchitectures"), m["subArchitectures"])
		for j, s := range subs {
			l.scmpArch(fmt.Sprintf("%s.subArchitectures[%d]", path, j), s)
		}
		if native {
			l.out.Arches = append(append(l.out.Arches, arch), subs...)
		}
	}
}

func (l *loader) syscall(path string, v any) {
	m, ok := l.object(path, v, "names", "name", "action", "errnoRet", "args", "comment", "includes", "excludes")
	if !ok {
		return
	}
	r := Rule{Comment: path}
	var names []string
	_, hasName := m["name"]
	_, hasNames := m["names"]
	switch {
	case hasName && hasNames:
		l.errorf(path, "both name and names are set; use names")
	case hasName:
		if s, ok := l.str(join(path, "name"), m["name"]); ok {
			names = []string{s}
		}
	case hasNames:
		names = l.strings(join(path, "names"), m["names"])
		if len(names) == 0 {
			l.errorf(join(path, "names"), "empty")
		}
	default:
		l.errorf(path, "no names")
	}
	// Every name is checked, even in a rule left out by its conditions.
	for i, n := range names {
		_, native := Lookup(l.t.Arch, n)
		switch {
		case native:
			r.Names = append(r.Names, n)
		case knownName(n):
			l.out.Skipped = append(l.out.Skipped, n)
		default:
			l.errorf(fmt.Sprintf("%s.names[%d]", path, i), "unknown system call %q", n)
		}
	}
	if v, ok := m["action"]; ok {
		r.Action, _ = l.action(join(path, "action"), v)
	} else {
		l.errorf(join(path, "action"), "missing (allowed: %s)", strings.Join(dockerActions, ", "))
	}
	if v, ok := m["errnoRet"]; ok && v != nil {
		r.Errno = l.errnoRet(join(path, "errnoRet"), v, r.Action)
	}
	if v, ok := m["comment"]; ok {
		if s, ok := l.str(join(path, "comment"), v); ok && s != "" {
			r.Comment += ": " + s
		}
	}
	if v, ok := m["args"]; ok && v != nil {
		a, ok := v.([]any)
		if !ok {
			l.errorf(join(path, "args"), "want an array, got %s", kind(v))
		}
		for i, e := range a {
			if arg, ok := l.arg(fmt.Sprintf("%s.args[%d]", path, i), e); ok {
				r.Args = append(r.Args, arg)
			}
		}
	}
	inc := l.filter(join(path, "includes"), m["includes"])
	exc := l.filter(join(path, "excludes"), m["excludes"])

	if why := l.leftOut(inc, exc); why != "" {
		l.out.Dropped = append(l.out.Dropped, fmt.Sprintf("%s (%s): %s", path, strings.Join(names, ", "), why))
		return
	}
	if len(r.Names) > 0 && len(r.Args) == 0 {
		// Two rules without conditions that do different things to one
		// call: the filter would act on the first alone, and the other
		// would be dropped without a word (found by a tester: an errno
		// rule for mkdir after an allow rule for it, mkdir allowed).
		if l.plain == nil {
			l.plain = map[string]plainRule{}
		}
		errno := r.Errno
		if r.Action == Errno && errno == 0 {
			errno = 1 // EPERM, what an errno rule without errnoRet returns
		}
		for _, n := range r.Names {
			p, seen := l.plain[n]
			switch {
			case !seen:
				l.plain[n] = plainRule{path, r.Action, errno}
			case p.action != r.Action || p.errno != errno:
				l.errorf(path, "%s is also in %s, with another action (%s there, %s here): with no conditions on either, only the first would apply; keep one", n, p.path, p.action, r.Action)
			}
		}
	}
	if len(r.Names) > 0 {
		l.out.Profile.Rules = append(l.out.Profile.Rules, r)
	}
}

func knownName(n string) bool {
	_, x := sysnumX86_64()[n]
	_, a := sysnumAarch64()[n]
	return x || a || otherArchNames()[n] || armPrivateNames()[n]
}

func (l *loader) arg(path string, v any) (Arg, bool) {
	m, ok := l.object(path, v, "index", "value", "valueTwo", "op")
	if !ok {
		return Arg{}, false
	}
	var a Arg
	good := true
	if v, ok := m["index"]; !ok {
		l.errorf(join(path, "index"), "missing (0 to 5)")
		good = false
	} else if i, ok := l.uint(join(path, "index"), v, 1<<64-1); !ok {
		good = false
	} else if i > 5 {
		l.errorf(join(path, "index"), "%d is above 5", i)
		good = false
	} else {
		a.Index = uint(i)
	}
	if v, ok := m["value"]; ok {
		a.Value, ok = l.uint(join(path, "value"), v, 1<<64-1)
		good = good && ok
	}
	if v, ok := m["valueTwo"]; ok {
		a.ValueTwo, ok = l.uint(join(path, "valueTwo"), v, 1<<64-1)
		good = good && ok
	}
	if v, ok := m["op"]; !ok {
		l.errorf(join(path, "op"), "missing (allowed: %s)", strings.Join(dockerOps, ", "))
		good = false
	} else if s, ok := l.str(join(path, "op"), v); !ok {
		good = false
	} else if a.Op = dockerOpOf()[s]; a.Op == 0 {
		l.errorf(join(path, "op"), "unknown operator %q (allowed: %s)", s, strings.Join(dockerOps, ", "))
		good = false
	}
	if a.Op != MaskedEQ && a.Op != 0 && a.ValueTwo != 0 {
		l.errorf(join(path, "valueTwo"), "set, but only SCMP_CMP_MASKED_EQ uses it (arg & value == valueTwo)")
		good = false
	}
	return a, good
}

// filter is a rule's includes or excludes.
type filter struct {
	caps, arches []string
	minKernel    *KernelVersion
}

func (l *loader) filter(path string, v any) *filter {
	if v == nil {
		return nil
	}
	m, ok := l.object(path, v, "caps", "arches", "minKernel")
	if !ok {
		return nil
	}
	f := &filter{}
	for i, c := range l.strings(join(path, "caps"), m["caps"]) {
		if !strings.HasPrefix(c, "CAP_") || strings.ToUpper(c) != c {
			l.errorf(fmt.Sprintf("%s.caps[%d]", path, i), "%q is not a capability name (CAP_...)", c)
		}
		f.caps = append(f.caps, c)
	}
	for i, a := range l.strings(join(path, "arches"), m["arches"]) {
		if !slices.Contains(dockerArchNames, a) {
			l.errorf(fmt.Sprintf("%s.arches[%d]", path, i), "unknown architecture %q (Docker's names: %s)", a, strings.Join(dockerArchNames, ", "))
		}
		f.arches = append(f.arches, a)
	}
	if v, ok := m["minKernel"]; ok && v != nil {
		s, _ := l.str(join(path, "minKernel"), v)
		var k KernelVersion
		if _, err := fmt.Sscanf(s, "%d.%d", &k.Major, &k.Minor); err != nil || s != k.String() || k == (KernelVersion{}) {
			l.errorf(join(path, "minKernel"), "%q is not a kernel version like \"4.8\"", s)
		} else {
			f.minKernel = &k
		}
	}
	return f
}

// leftOut says why a rule with these conditions does not apply to the
// target, or "" if it does. As in Docker: a rule is left out if the target
// has any excluded capability or architecture, or a kernel at least the
// excluded minKernel; and unless it has every included capability, one of
// the included architectures, and a kernel at least the included minKernel.
func (l *loader) leftOut(inc, exc *filter) string {
	arch := dockerArchOf()[l.t.Arch]
	if exc != nil {
		if slices.Contains(exc.arches, arch) {
			return "excludes.arches lists " + arch
		}
		for _, c := range exc.caps {
			if slices.Contains(l.t.Caps, c) {
				return "excludes.caps lists " + c
			}
		}
		if exc.minKernel != nil && l.t.Kernel.atLeast(*exc.minKernel) {
			return fmt.Sprintf("excludes.minKernel %s and the kernel is %s", exc.minKernel, l.t.Kernel)
		}
	}
	if inc != nil {
		if len(inc.arches) > 0 && !slices.Contains(inc.arches, arch) {
			return fmt.Sprintf("includes.arches %v and the architecture is %s", inc.arches, arch)
		}
		for _, c := range inc.caps {
			if !slices.Contains(l.t.Caps, c) {
				return "includes.caps " + c + ", which the command does not have"
			}
		}
		if inc.minKernel != nil && !l.t.Kernel.atLeast(*inc.minKernel) {
			return fmt.Sprintf("includes.minKernel %s and the kernel is %s", inc.minKernel, l.t.Kernel)
		}
	}
	return ""
}
