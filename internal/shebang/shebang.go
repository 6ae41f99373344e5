// Package shebang reads a script's #! line as the kernel's binfmt_script
// does. It owns that parse, which the exec check's decision (package
// sandbox) and the backend's pinning of the files an exec runs (package
// native) must make alike: a difference between them is a file decided
// that is not the one run. It reads no file itself.
package shebang

import "bytes"

// BufSize is how much of a file the kernel reads to decide how to run it
// (BINPRM_BUF_SIZE): a #! line is looked for there.
const BufSize = 256

// Parse returns the interpreter and its optional argument of a script
// whose first bytes are buf (at most BufSize of them): the first line
// after "#!"; with no newline there, the line ends before the last of the
// bytes, which the kernel overwrites with its NUL (reading that byte too
// let "#!/usr/bin/git <pad>pushX" be decided as git pushX while git push
// ran). The interpreter ends at a space or a tab, the argument is the
// rest, trimmed. false when buf is no script's.
func Parse(buf []byte) (interp, arg string, ok bool) {
	line, found := bytes.CutPrefix(buf, []byte("#!"))
	if !found {
		return "", "", false
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	} else {
		line = line[:min(len(line), BufSize-3)] // "#!", and the kernel's NUL
	}
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	line = bytes.Trim(line, " \t")
	if len(line) == 0 {
		return "", "", false
	}
	i := bytes.IndexAny(line, " \t")
	if i < 0 {
		return string(line), "", true
	}
	return string(line[:i]), string(bytes.TrimLeft(line[i:], " \t")), true
}
