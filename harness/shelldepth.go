package harness

import (
	"io"
	"runtime"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The parser (mvdan.cc/sh) descends once for each level of brackets,
// compound commands and command substitutions, and once for each operator
// of a chain (a && b && …, 1+1+… in arithmetic), with no bound of its
// own: a line of a few hundred kilobytes took a goroutine's stack past
// Go's limit, which is fatal to the whole process (a daemon and every
// session in it) and no recover catches. An estimate from the line's
// characters was tried and dropped: quotes, escapes, comments and words
// that only look like closers made it low on lines the parser descends
// into (a reviewer's 320 KB line rated 1,703 levels overflowed 1 GiB).
// So the parse measures itself: it reads the line a little at a time,
// and each read looks at how deep the stack below it is, ending the
// parse by a panic (recovered here) past maxParseFrames. Between two
// reads the parse descends at most once per byte read.
//
// The tree a parse gives is walked (syntax.Walk) as deep as it is, which
// a long chain makes deep though the parser built it in a loop: the walk
// stops at maxWalkDepth levels, and the line counts as too deep too.
const (
	maxParseFrames = 6000
	parseChunk     = 256
	maxWalkDepth   = 3000
)

// tooDeep is the panic that ends a parse past maxParseFrames.
type tooDeep struct{}

// depthReader feeds a parse parseChunk bytes at a time, checking its depth
// at each read.
type depthReader struct {
	s   string
	pcs [1]uintptr
}

func (d *depthReader) Read(p []byte) (int, error) {
	// A frame past maxParseFrames exists only if the stack is deeper.
	if runtime.Callers(maxParseFrames, d.pcs[:]) > 0 {
		panic(tooDeep{})
	}
	if d.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), parseChunk)], d.s)
	d.s = d.s[n:]
	return n, nil
}

// parseBounded parses src in the shell language lang; deep says it nests
// deeper than a parse may descend.
func parseBounded(src string, lang syntax.LangVariant) (f *syntax.File, err error, deep bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(tooDeep); !ok {
				panic(r)
			}
			f, err, deep = nil, nil, true
		}
	}()
	f, err = syntax.NewParser(syntax.Variant(lang)).Parse(&depthReader{s: src}, "")
	return f, err, false
}

// tooNestedWhy is the reason a line nesting too deeply is not read.
func tooNestedWhy() string {
	return "the shell line nests deeper than moat reads (past " + strconv.Itoa(maxParseFrames) + " frames of its parser)"
}

// shellLangs are the languages the shell name reads its scripts in, as
// moat parses them: sh may be bash or a POSIX shell (dash), which read
// some lines differently ($'…', ((…))), so both are read; nil for a shell
// whose language moat cannot parse (fish, csh), whose script then counts
// as hiding what it runs.
func shellLangs(name string) []syntax.LangVariant {
	switch strings.TrimSuffix(name, ".exe") {
	case "bash", "rbash", "busybox-bash":
		return []syntax.LangVariant{syntax.LangBash}
	case "sh":
		return []syntax.LangVariant{syntax.LangBash, syntax.LangPOSIX}
	case "dash", "ash", "posh", "yash", "busybox-sh":
		return []syntax.LangVariant{syntax.LangPOSIX}
	case "ksh", "mksh", "lksh", "pdksh", "oksh":
		return []syntax.LangVariant{syntax.LangMirBSDKorn, syntax.LangPOSIX}
	case "zsh":
		return []syntax.LangVariant{syntax.LangZsh, syntax.LangBash}
	}
	return nil
}
