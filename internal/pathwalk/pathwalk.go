// Package pathwalk follows an absolute path on the host as the kernel
// resolves it, one component at a time, and says every place it goes
// through: each component, a link's own place and then what the link
// names. Its callers decide about those places (the exec check, whether
// a program was reached through a path the command could change; the
// daemon, whether a tenant's workspace path passes through /proc), which
// filepath.EvalSymlinks, returning only where a path ends, cannot tell
// them. It owns the walk and nothing else: it opens nothing and decides
// nothing about what it finds.
package pathwalk

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxLinks is the kernel's bound on the links one resolution follows
// (MAXSYMLINKS): past it, a path does not resolve (ELOOP).
const maxLinks = 40

// Walk resolves the absolute path p and returns the places it went
// through, in order, and where p leads; ok is false when a component is
// missing or cannot be looked at, or the links loop (visits then end at
// the place that failed).
func Walk(p string) (visits []string, resolved string, ok bool) {
	rest := strings.Split(p, "/")
	cur := "/"
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		visits = append(visits, next)
		fi, err := os.Lstat(next)
		if err != nil {
			return visits, "", false
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxLinks {
			return visits, "", false
		}
		t, err := os.Readlink(next)
		if err != nil {
			return visits, "", false
		}
		if filepath.IsAbs(t) {
			cur = "/"
		}
		rest = append(strings.Split(t, "/"), rest...)
	}
	return visits, cur, true
}
