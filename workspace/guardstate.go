package workspace

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// A Guard lives in the process that ran the command: a daemon that dies
// while its direct-mode sessions are open (SIGKILL, the host's OOM
// killer), or moat run killed outright, takes with it what Finish needs,
// and the paths those commands planted would stay where host tools run
// them. State is what a daemon writes in its session record, and a run
// in its run record, before the first process starts; ResumeGuard, in
// the next daemon or run, makes a Guard of it whose Finish does what the
// dead one's would have, once the sandbox's processes are gone.
//
// The state is lines of words, each string in Go's quoted form
// (strconv.Quote): every run with a writable workspace writes one, and
// encoding/json's reflection cost a run more CPU than the rest of the
// record; quoting also keeps a path that is not UTF-8 as it is, which
// JSON would not. The roots are identified by device and inode as well
// as by path: the Guard of a dead process works below the directories it
// opened, and a resumed one below the same directories or none.

// guardStateHeader begins a state, with its version.
const guardStateHeader = "moat-guard 1"

// ErrGuardMoved is ResumeGuard's error for a root that is no longer the
// directory the Guard opened: it was removed, or another put in its place.
var ErrGuardMoved = errors.New("not the directory the run began with")

// State is what ResumeGuard needs to finish g in another process; nil
// for a Guard with nothing to finish (the command could not write its
// root).
func (g *Guard) State() ([]byte, error) {
	if !g.writable {
		return nil, nil
	}
	b := make([]byte, 0, 1024)
	line := func(key string, words ...any) {
		b = append(b, key...)
		for _, w := range words {
			b = append(b, ' ')
			switch w := w.(type) {
			case string:
				b = strconv.AppendQuote(b, w)
			case int:
				b = strconv.AppendInt(b, int64(w), 10)
			case int64:
				b = strconv.AppendInt(b, w, 10)
			case uint64:
				b = strconv.AppendUint(b, w, 10)
			case bool:
				b = strconv.AppendBool(b, w)
			}
		}
		b = append(b, '\n')
	}
	b = append(b, guardStateHeader+"\n"...)
	line("ws", g.ws)
	line("real", g.real)
	line("start", g.start.Sec, g.start.Nsec)
	line("gitdir", g.gitdir)
	line("common", g.common)
	line("objfmt", g.objFmt)
	line("flags", g.absolute, g.topGit)
	for _, bd := range g.binds {
		line("bind", bd.Path, bd.ReadOnly)
	}
	for _, r := range g.absent {
		line("absent", r.base, r.rel, r.first, r.fileAtFirst)
	}
	for _, l := range g.links {
		line("link", l.base, l.rel, l.target)
	}
	for _, d := range slices.Sorted(maps.Keys(g.gitdirs)) {
		line("gitdirs", d)
	}
	for _, p := range slices.Sorted(maps.Keys(g.gitlinks)) {
		line("gitlink", p)
	}
	for _, e := range g.topHad {
		line("tophad", e)
	}
	for _, base := range slices.Sorted(maps.Keys(g.pins)) {
		fi, err := os.Stat(g.pins[base].self())
		if err != nil {
			return nil, fmt.Errorf("workspace guard: %w", err)
		}
		_, dev, ino, _ := blocksOf(fi)
		line("root", base, g.hostPath(base), dev, ino)
	}
	return b, nil
}

// rootID is a root's path on the host and the identity of the directory
// NewGuard opened there.
type rootID struct {
	path     string
	dev, ino uint64
}

// ResumeGuard makes a Guard of what State returned, in a process other
// than the one whose run it protected, for its Finish alone: it opens
// the roots again (with no symlink on their paths), and refuses with
// ErrGuardMoved a root that is not the directory the first Guard opened.
// Its caller makes sure, as for Finish, that no process of the run is
// alive.
func ResumeGuard(data []byte) (*Guard, error) {
	text, ok := strings.CutPrefix(string(data), guardStateHeader+"\n")
	if !ok {
		return nil, errors.New("workspace guard state: not one this moat writes")
	}
	g := &Guard{writable: true, seen: map[string]bool{}, gitdirs: map[string]bool{}, gitlinks: map[string]bool{}, pins: map[string]pinnedDir{}}
	roots := map[string]rootID{}
	for n, ln := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		key, rest, _ := strings.Cut(ln, " ")
		w, err := words(rest)
		if err != nil {
			return nil, fmt.Errorf("workspace guard state: line %d: %w", n+2, err)
		}
		if err := g.setState(key, w, roots); err != nil {
			return nil, fmt.Errorf("workspace guard state: line %d (%s): %w", n+2, key, err)
		}
	}
	if g.ws == "" || roots[g.ws].path == "" {
		return nil, errors.New("workspace guard state: no workspace")
	}
	for base, id := range roots {
		d, err := pinDir(id.path)
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("workspace guard: %w", err)
		}
		g.pins[base] = d
		fi, err := os.Stat(d.self())
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("workspace guard: %w", err)
		}
		if _, dev, ino, _ := blocksOf(fi); dev != id.dev || ino != id.ino {
			g.Close()
			return nil, fmt.Errorf("workspace guard: %s: %w", id.path, ErrGuardMoved)
		}
	}
	return g, nil
}

// setState sets in g (and roots) what one line of a state says.
func (g *Guard) setState(key string, w stateWords, roots map[string]rootID) error {
	switch key {
	case "ws":
		g.ws = w.str(0)
	case "real":
		g.real = w.str(0)
	case "start":
		g.start = stamp{Sec: w.int(0), Nsec: w.int(1)}
	case "gitdir":
		g.gitdir = w.str(0)
	case "common":
		g.common = w.str(0)
	case "objfmt":
		g.objFmt = w.str(0)
	case "flags":
		g.absolute, g.topGit = w.bool(0), w.bool(1)
	case "bind":
		g.binds = append(g.binds, Bind{Path: w.str(0), ReadOnly: w.bool(1)})
	case "absent":
		g.absent = append(g.absent, route{base: w.str(0), rel: w.str(1), first: int(w.int(2)), fileAtFirst: w.bool(3)})
	case "link":
		g.links = append(g.links, link{base: w.str(0), rel: w.str(1), target: w.str(2)})
	case "gitdirs":
		g.gitdirs[w.str(0)] = true
	case "gitlink":
		g.gitlinks[w.str(0)] = true
	case "tophad":
		g.topHad = append(g.topHad, w.str(0))
	case "root":
		roots[w.str(0)] = rootID{path: w.str(1), dev: uint64(w.int(2)), ino: uint64(w.int(3))}
	default:
		return errors.New("unknown")
	}
	return w.err
}

// stateWords are the words of a line of a state, strings unquoted; the
// first word a getter could not take is its err.
type stateWords struct {
	w   []string
	err error
}

// words splits s into words: a Go-quoted string, or a run of anything
// but a space.
func words(s string) (stateWords, error) {
	var w stateWords
	for s != "" {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return w, err
			}
			u, _ := strconv.Unquote(q)
			w.w = append(w.w, u)
			s = strings.TrimPrefix(s[len(q):], " ")
			continue
		}
		word, rest, _ := strings.Cut(s, " ")
		w.w, s = append(w.w, word), rest
	}
	return w, nil
}

func (w *stateWords) word(i int) string {
	if i >= len(w.w) {
		if w.err == nil {
			w.err = fmt.Errorf("%d words, not %d", len(w.w), i+1)
		}
		return ""
	}
	return w.w[i]
}

func (w *stateWords) str(i int) string { return w.word(i) }

func (w *stateWords) int(i int) int64 {
	s := w.word(i)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		u, uerr := strconv.ParseUint(s, 10, 64) // a device or inode number
		if uerr != nil && w.err == nil {
			w.err = fmt.Errorf("%q is not a number", s)
		}
		n = int64(u)
	}
	return n
}

func (w *stateWords) bool(i int) bool {
	s := w.word(i)
	b, err := strconv.ParseBool(s)
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("%q is not true or false", s)
	}
	return b
}
