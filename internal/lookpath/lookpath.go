// Package lookpath is the part of a PATH search that the sandbox's init
// stage, the direct start's plan and the host's check of a command line
// share: which directories a program name without a slash is looked for
// in. What makes a candidate the program (and what a failure says) stays
// with each caller. It imports only strings and path/filepath, which the
// init stage has anyway, and has no package state.
package lookpath

import (
	"path/filepath"
	"strings"
)

// DefaultPath is the PATH a command gets when its environment names none.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// Dirs returns, in order, the directories a program name without a slash
// is looked for in: those of env's PATH (its last PATH= entry), or of def
// when env has none; an empty element (PATH's way of naming the working
// directory) is ".".
func Dirs(env []string, def string) []string {
	p := def
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p = v
		}
	}
	dirs := filepath.SplitList(p)
	for i, d := range dirs {
		if d == "" {
			dirs[i] = "."
		}
	}
	return dirs
}
