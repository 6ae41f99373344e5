package seccomp

import "strings"

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
// PreloadVars to a value that names something (not only separators).
func IsPreload(w string) bool {
	name, value, ok := strings.Cut(w, "=")
	if !ok || strings.Trim(value, " :;\t\n") == "" {
		return false
	}
	for _, v := range PreloadVars {
		if name == v {
			return true
		}
	}
	return false
}
