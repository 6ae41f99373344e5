package cgroup

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// v1Controllers are the v1 controllers this package uses. Other controllers
// and named hierarchies (name=systemd) are ignored.
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// mount is one cgroup filesystem from /proc/self/mountinfo.
type mount struct {
	point       string   // where it is mounted
	root        string   // the cgroup shown at point, relative to the hierarchy's root
	v2          bool     // cgroup2
	controllers []string // v1: those of v1Controllers this hierarchy carries
}

// parseMountInfo returns the cgroup mounts of a mountinfo file (proc(5)):
//
//	36 35 98:0 /root /mnt rw,noatime master:1 - cgroup cgroup rw,memory
//	(1)(2)(3)  (4)   (5)  (6)       (7)      (8) (9)   (10)   (11)
func parseMountInfo(data []byte) []mount {
	var ms []mount
	for line := range bytes.Lines(data) {
		f := strings.Fields(string(line))
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(f) {
			continue
		}
		m := mount{point: unescapeOctal(f[4]), root: unescapeOctal(f[3])}
		switch f[sep+1] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for opt := range strings.SplitSeq(f[sep+3], ",") {
				for _, c := range v1Controllers {
					if opt == c {
						m.controllers = append(m.controllers, c)
					}
				}
			}
			if len(m.controllers) == 0 {
				continue
			}
		default:
			continue
		}
		ms = append(ms, m)
	}
	return ms
}

// unescapeOctal undoes the \ooo escapes of space, tab, newline and backslash
// in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// procCgroups is the caller's cgroup membership from /proc/self/cgroup.
type procCgroups struct {
	v1 map[string]string // controller -> cgroup path
	v2 string            // cgroup path on the unified hierarchy; "" if the line is absent
}

// parseProcCgroup parses /proc/self/cgroup: "hierarchy-ID:controllers:path"
// per line, "0::path" for the unified hierarchy (cgroups(7)).
func parseProcCgroup(data []byte) procCgroups {
	pc := procCgroups{v1: map[string]string{}}
	for line := range bytes.Lines(data) {
		f := strings.SplitN(strings.TrimSuffix(string(line), "\n"), ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			pc.v2 = f[2]
			continue
		}
		for c := range strings.SplitSeq(f[1], ",") {
			pc.v1[c] = f[2]
		}
	}
	return pc
}

// layout is where the caller's cgroup is, per controller.
type layout struct {
	v1    map[string]string // v1 controller -> directory of the caller's cgroup
	v1Why map[string]string // v1 controller mounted but the caller's cgroup not reachable -> why
	// v2 is the directory of the caller's cgroup on the unified hierarchy,
	// "" when cgroup2 is not mounted or the caller's cgroup is not visible.
	v2      string
	v2Root  bool   // v2 is the root of the hierarchy (exempt from the no-internal-process rule)
	v2Mount string // where the mount that shows v2 is mounted
	// v2Top is the directory of the hierarchy's root (a mount of the whole
	// tree), "" when no mount shows it (a cgroup namespace, say).
	v2Top     string
	v2Mounted bool // a cgroup2 filesystem is mounted, whether or not it shows the caller's cgroup
}

// resolve finds the directory of the caller's cgroup on each hierarchy. When
// a hierarchy is mounted more than once, the first mount that shows the
// caller's cgroup wins.
func resolve(ms []mount, pc procCgroups) layout {
	l := layout{v1: map[string]string{}, v1Why: map[string]string{}}
	for _, m := range ms {
		if m.v2 {
			l.v2Mounted = true
			if m.root == "/" && l.v2Top == "" {
				l.v2Top = m.point
			}
			if l.v2 != "" || pc.v2 == "" {
				continue
			}
			if rel, ok := relativeTo(m.root, pc.v2); ok {
				l.v2, l.v2Root, l.v2Mount = path.Join(m.point, rel), rel == "/", m.point
			}
			continue
		}
		for _, c := range m.controllers {
			if _, done := l.v1[c]; done {
				continue
			}
			p, ok := pc.v1[c]
			if !ok {
				l.v1Why[c] = fmt.Sprintf("/proc/self/cgroup has no %s line although %s is mounted at %s", c, c, m.point)
				continue
			}
			rel, ok := relativeTo(m.root, p)
			if !ok {
				l.v1Why[c] = fmt.Sprintf("current %s cgroup %s is outside the mount at %s (which shows %s)", c, p, m.point, m.root)
				continue
			}
			l.v1[c] = path.Join(m.point, rel)
			delete(l.v1Why, c)
		}
	}
	return l
}

// relativeTo returns cg relative to a mount's root, as an absolute path, or
// false when the mount does not show cg.
func relativeTo(root, cg string) (string, bool) {
	root = path.Clean(root)
	cg = path.Clean(cg)
	switch {
	case root == "/":
		return cg, true
	case cg == root:
		return "/", true
	case strings.HasPrefix(cg, root+"/"):
		return cg[len(root):], true
	}
	return "", false
}

// version names the layout as reported in Info.Version.
func (l layout) version() string {
	v1 := len(l.v1)+len(l.v1Why) > 0
	switch {
	case v1 && l.v2Mounted:
		return "hybrid"
	case v1:
		return "v1"
	case l.v2Mounted:
		return "v2"
	}
	return "none"
}

// keyedValue returns the value of key in a flat keyed file such as
// memory.events or cpu.stat ("key value" per line), 0 when absent.
func keyedValue(data []byte, key string) int64 {
	for line := range bytes.Lines(data) {
		k, v, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
