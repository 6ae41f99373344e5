package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
)

// A Guard lives in the process that ran the command: a daemon that dies
// while its direct-mode sessions are open (SIGKILL, the host's OOM
// killer) takes with it what Finish needs, and the paths those sessions'
// commands planted would stay where host tools run them. State is what a
// daemon writes in its session record before the session's first process
// starts; ResumeGuard, in the next daemon, makes a Guard of it whose
// Finish does what the dead one's would have, once the sandbox's
// processes are gone.

// guardState is the part of a Guard that Finish reads, in a form that
// outlives the process. The roots are identified by device and inode as
// well as by path: the Guard of a dead daemon works below the
// directories it opened, and a resumed one below the same directories or
// none.
type guardState struct {
	Version  int               `json:"version"`
	WS       string            `json:"ws"`
	Real     string            `json:"real"`
	Start    stamp             `json:"start"`
	Binds    []Bind            `json:"binds,omitempty"`
	Absent   []routeState      `json:"absent,omitempty"`
	Links    []linkState       `json:"links,omitempty"`
	GitDir   string            `json:"gitdir,omitempty"`
	Common   string            `json:"common,omitempty"`
	GitDirs  []string          `json:"gitdirs,omitempty"`
	GitLinks []string          `json:"gitlinks,omitempty"`
	ObjFmt   string            `json:"objfmt,omitempty"`
	Absolute bool              `json:"absolute,omitempty"`
	TopGit   bool              `json:"topgit,omitempty"`
	TopHad   []string          `json:"tophad,omitempty"`
	Roots    map[string]rootID `json:"roots"`
}

type routeState struct {
	Base        string `json:"base"`
	Rel         string `json:"rel"`
	First       int    `json:"first"`
	FileAtFirst bool   `json:"file_at_first,omitempty"`
}

type linkState struct {
	Base   string `json:"base"`
	Rel    string `json:"rel"`
	Target string `json:"target"`
}

// rootID is a root's path on the host and the identity of the directory
// NewGuard opened there.
type rootID struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

const guardStateVersion = 1

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
	s := guardState{Version: guardStateVersion, WS: g.ws, Real: g.real, Start: g.start,
		Binds: g.binds, GitDir: g.gitdir, Common: g.common, ObjFmt: g.objFmt,
		Absolute: g.absolute, TopGit: g.topGit, TopHad: g.topHad, Roots: map[string]rootID{},
		GitDirs: slices.Sorted(maps.Keys(g.gitdirs)), GitLinks: slices.Sorted(maps.Keys(g.gitlinks))}
	for _, r := range g.absent {
		s.Absent = append(s.Absent, routeState{Base: r.base, Rel: r.rel, First: r.first, FileAtFirst: r.fileAtFirst})
	}
	for _, l := range g.links {
		s.Links = append(s.Links, linkState{Base: l.base, Rel: l.rel, Target: l.target})
	}
	for base, d := range g.pins {
		fi, err := os.Stat(d.self())
		if err != nil {
			return nil, fmt.Errorf("workspace guard: %w", err)
		}
		_, dev, ino, _ := blocksOf(fi)
		s.Roots[base] = rootID{Path: g.hostPath(base), Dev: dev, Ino: ino}
	}
	return json.Marshal(s)
}

// ResumeGuard makes a Guard of what State returned, in a process other
// than the one whose run it protected, for its Finish alone: it opens
// the roots again (with no symlink on their paths), and refuses with
// ErrGuardMoved a root that is not the directory the first Guard opened.
// Its caller makes sure, as for Finish, that no process of the run is
// alive.
func ResumeGuard(data []byte) (*Guard, error) {
	var s guardState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("workspace guard state: %w", err)
	}
	if s.Version != guardStateVersion {
		return nil, fmt.Errorf("workspace guard state: version %d, not %d", s.Version, guardStateVersion)
	}
	if s.WS == "" || s.Roots[s.WS].Path == "" {
		return nil, errors.New("workspace guard state: no workspace")
	}
	g := &Guard{ws: s.WS, real: s.Real, start: s.Start, binds: s.Binds, gitdir: s.GitDir, common: s.Common,
		objFmt: s.ObjFmt, absolute: s.Absolute, topGit: s.TopGit, topHad: s.TopHad, writable: true,
		seen: map[string]bool{}, gitdirs: map[string]bool{}, gitlinks: map[string]bool{}, pins: map[string]pinnedDir{}}
	for _, d := range s.GitDirs {
		g.gitdirs[d] = true
	}
	for _, p := range s.GitLinks {
		g.gitlinks[p] = true
	}
	for _, r := range s.Absent {
		g.absent = append(g.absent, route{base: r.Base, rel: r.Rel, first: r.First, fileAtFirst: r.FileAtFirst})
	}
	for _, l := range s.Links {
		g.links = append(g.links, link{base: l.Base, rel: l.Rel, target: l.Target})
	}
	for base, id := range s.Roots {
		d, err := pinDir(id.Path)
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
		if _, dev, ino, _ := blocksOf(fi); dev != id.Dev || ino != id.Ino {
			g.Close()
			return nil, fmt.Errorf("workspace guard: %s: %w", id.Path, ErrGuardMoved)
		}
	}
	return g, nil
}
