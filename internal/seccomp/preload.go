package seccomp

import (
	"slices"
	"strings"
)

// PreloadVars are the environment variables that make the dynamic loader
// (or the C library, for GCONV_PATH's iconv modules) load code of the
// caller's choosing into a program, before or beside its own: a library
// preloaded or audited, one found first in a directory of its own, a
// conversion module. An exec given one is told to its checker
// (ExecCall.Preload), since that code can make the program do anything
// whatever its argv says.
var PreloadVars = []string{"LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "GCONV_PATH"}

// maxPreloadName is the length of the longest of PreloadVars, with its "=".
const maxPreloadName = len("LD_LIBRARY_PATH=")

// IsPreload says whether the environment word w (NAME=VALUE) sets one of
// PreloadVars to anything at all: even separators alone name something,
// since the loader reads an empty entry of LD_LIBRARY_PATH as the working
// directory (found by a tester: LD_LIBRARY_PATH=: loaded ./libz.so.1).
func IsPreload(w string) bool {
	name, value, ok := strings.Cut(w, "=")
	if !ok || value == "" {
		return false
	}
	return slices.Contains(PreloadVars, name)
}
