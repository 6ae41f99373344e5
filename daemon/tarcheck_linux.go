package daemon

import (
	"archive/tar"
	"errors"
	"fmt"
	"path"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/internal/relpath"
	"github.com/moatbox/moat/sandbox"
)

// Where an upload's entries really land, checked before anything is
// written (checkTarPaths). checkTarEntry looks at one header alone: a
// name beneath the directory, a link's target joined lexically with the
// link's directory. That is not where the kernel goes when a component
// on the way is a link, one the workspace has or one the archive itself
// makes: with b -> ".", the target "b/.." is "." lexically but the
// workspace's parent in fact; with h -> ".git/hooks", the entry
// "h/pre-commit" is a protected path. So the whole archive is walked
// again over tarView, the workspace as the upload leaves it (the
// archive's links over the workspace's), resolving each path as the
// kernel would, every link followed:
//
//   - a link's target is resolved from the link's real directory in the
//     view the whole archive leaves, following each link it meets (the
//     archive's or the workspace's) and applying ".." to the real place
//     reached, never to the name; a walk that goes above the root, meets
//     an absolute target or loops refuses the link (bad_request). This is
//     sound: a link the kernel resolves outside the root must, at some
//     step, apply ".." at the root or follow an absolute target, and
//     the walk makes every step the kernel makes on the workspace as it
//     is when checked.
//   - an entry's place is its parent resolved likewise, joined with its
//     name; the protected paths and the filesystem rules are checked on
//     that place, so an archive whose entry reaches one only through a
//     link is refused whole, as one naming it directly is.
//   - what the writing would refuse halfway is refused here too: an entry
//     beneath the archive's own link or file, entries of different kinds
//     at one place, a directory entry where the workspace has a file or a
//     link, a file or link where it has a directory.
//
// The workspace may change between the check and the writing (a command
// of the session runs meanwhile); each write still resolves beneath the
// root and checks its real place again (Session.target), so such a change
// can stop an upload partway, leaving whole files only, but never lets it
// write a protected path or outside the workspace. A link's target is not
// resolved when the link is made: a command could make the same link.
// The walk itself is relpath's, shared with the review of a change set.

// tarView is the workspace as an upload leaves it, entry by entry.
type tarView struct {
	s     *Session
	links map[string]string // the archive's links so far, by real place: their targets
	files map[string]bool   // the real places of the archive's regular files so far
	dirs  map[string]bool   // the real places of directories entries were written in or made
}

// resolve returns the real place of rel, relative to the real directory
// from: clean, relative to the root, every link on its way followed, the
// last component's too. via says whether one of the archive's links was
// followed.
func (v *tarView) resolve(from, rel string) (real string, via bool, err error) {
	real, err = relpath.Resolve(from, rel, func(p string, within bool) (string, bool, error) {
		target, isLink, fromArchive, err := v.link(p, within)
		via = via || isLink && fromArchive
		return target, isLink, err
	})
	return real, via, err
}

// link says whether the real place p is a link in the view, and its
// target. within says that the walk goes on beneath p.
func (v *tarView) link(p string, within bool) (target string, isLink, fromArchive bool, err error) {
	if t, ok := v.links[p]; ok {
		return t, true, true, nil
	}
	if v.files[p] {
		if within {
			return "", false, false, fmt.Errorf("%w: %q is a file of the archive, not a directory", ErrBadRequest, p)
		}
		return "", false, false, nil
	}
	d, base := path.Split(p)
	if d == "" {
		d = "."
	}
	dir, err := v.s.openBeneath(d, unix.O_PATH|unix.O_DIRECTORY, 0)
	if errors.Is(err, ErrNoFile) {
		return "", false, false, nil // not there: the upload makes it
	}
	if err != nil {
		return "", false, false, err
	}
	defer dir.Close()
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(int(dir.Fd()), base, buf)
	switch {
	case err == nil:
		return string(buf[:n]), true, false, nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		return "", false, false, nil // not a link, or not there
	}
	return "", false, false, v.s.pathError(p, err)
}

// kind is what the workspace has at the real place p now: 0 for nothing,
// else tar.TypeReg (any file not a directory or link), TypeDir or
// TypeSymlink.
func (v *tarView) kind(p string) (byte, error) {
	d, base := path.Split(p)
	if d == "" {
		d = "."
	}
	dir, err := v.s.openBeneath(d, unix.O_PATH|unix.O_DIRECTORY, 0)
	if errors.Is(err, ErrNoFile) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer dir.Close()
	var st unix.Stat_t
	err = unix.Fstatat(int(dir.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return 0, nil
	case err != nil:
		return 0, v.s.pathError(p, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return tar.TypeDir, nil
	case unix.S_IFLNK:
		return tar.TypeSymlink, nil
	}
	return tar.TypeReg, nil
}

// checkTarPaths checks where the entries of an upload into dir really
// land (see above), before anything is written, and returns the real
// place of every path the upload makes or passes (the entries and the
// directories on their way, by their names in the archive), for the write
// rules to decide them there too.
func (s *Session) checkTarPaths(dir string, entries []*tarEntry) (map[string]string, error) {
	v := &tarView{s: s, links: map[string]string{}, files: map[string]bool{}, dirs: map[string]bool{}}
	places := map[string]string{}
	real := map[string]string{".": "."} // a directory's name in the archive: its real place
	via := map[string]bool{}            // the directories reached through a link the archive makes
	// place checks the real place at of rel, where the upload makes or
	// finds it.
	place := func(rel, at string) error {
		if s.protected(at) {
			return fmt.Errorf("%w: %q is protected: host tools run or read it (the upload reaches it as %q)", ErrProtected, at, rel)
		}
		if err := s.changeable(rel, at); err != nil {
			return err
		}
		places[rel] = at
		return nil
	}
	// realDir resolves the directory rel, checking each one on its way as
	// mkdirAll will make or find it.
	var realDir func(rel string) (string, error)
	realDir = func(rel string) (string, error) {
		if r, ok := real[rel]; ok {
			return r, nil
		}
		if path.Dir(rel) == rel {
			// Not beneath the root (checkTarEntry refuses such a name):
			// no parent would ever end the walk up.
			return "", fmt.Errorf("%w: %q is not a path beneath the workspace", ErrBadRequest, rel)
		}
		parent, err := realDir(path.Dir(rel))
		if err != nil {
			return "", err
		}
		at := joinRel(parent, path.Base(rel))
		if err := place(rel, at); err != nil {
			return "", err
		}
		if v.files[at] {
			return "", fmt.Errorf("%w: %q is a file of the archive, and other entries lie beneath it", ErrBadRequest, rel)
		}
		if k, err := v.kind(at); err != nil {
			return "", err
		} else if k == tar.TypeReg {
			return "", fmt.Errorf("%w: %q is a file in the workspace, and entries of the archive lie beneath it", ErrBadRequest, rel)
		}
		r, viaArchive, err := v.resolve(parent, path.Base(rel))
		switch {
		case err == relpath.ErrOut || err == relpath.ErrLoop:
			return "", fmt.Errorf("%w: %q %v", ErrWorkspace, rel, err)
		case err != nil:
			return "", err
		}
		v.dirs[at], v.dirs[r] = true, true
		real[rel] = r
		via[rel] = viaArchive || via[path.Dir(rel)]
		return r, nil
	}
	if _, err := realDir(dir); err != nil {
		return nil, err
	}
	type link struct{ rel, dir, target string }
	var links []link
	for _, e := range entries {
		bad := func(why string) error { return fmt.Errorf("%w: tar entry %q: %s", ErrBadRequest, e.name, why) }
		parent, err := realDir(path.Dir(e.rel))
		if err != nil {
			return nil, err
		}
		at := joinRel(parent, path.Base(e.rel))
		if err := place(e.rel, at); err != nil {
			return nil, err
		}
		if via[path.Dir(e.rel)] {
			// tar writes a link as a link and never what lies beneath
			// it: an entry beneath one of the archive's own links would
			// land where the writing finds the link, not checked here.
			return nil, bad("it lies beneath a link the archive makes; an archive's entries lie beneath real directories")
		}
		// What is at the place already, made by the archive or in the
		// workspace, must take this entry: the writing would stop halfway.
		_, wasLink := v.links[at]
		switch {
		case wasLink && e.typ != tar.TypeSymlink, v.files[at] && e.typ != tar.TypeReg, v.dirs[at] && e.typ != tar.TypeDir:
			return nil, bad(fmt.Sprintf("another entry of the archive makes %q a different kind of file", e.rel))
		}
		k, err := v.kind(at)
		if err != nil {
			return nil, err
		}
		switch {
		case e.typ == tar.TypeDir && k == tar.TypeSymlink:
			return nil, bad(fmt.Sprintf("%q is a symbolic link in the workspace, where the archive has a directory", e.rel))
		case e.typ == tar.TypeDir && k == tar.TypeReg:
			return nil, bad(fmt.Sprintf("%q is a file in the workspace, where the archive has a directory", e.rel))
		case e.typ != tar.TypeDir && k == tar.TypeDir:
			return nil, bad(fmt.Sprintf("%q is a directory in the workspace, where the archive has a file", e.rel))
		}
		switch e.typ {
		case tar.TypeDir:
			v.dirs[at] = true
			real[e.rel] = at
		case tar.TypeSymlink:
			v.links[at] = e.target
			links = append(links, link{e.name, parent, e.target})
		default:
			v.files[at] = true
		}
	}
	// The links' targets, in the view the whole archive leaves.
	for _, l := range links {
		// The target as it is: cleaned, "b/.." would lose b before b
		// is followed.
		if _, _, err := v.resolve(l.dir, l.target); err != nil {
			if err == relpath.ErrOut || err == relpath.ErrLoop {
				err = fmt.Errorf("a link that %v", err)
			}
			return nil, fmt.Errorf("%w: tar entry %q: %v", ErrBadRequest, l.rel, err)
		}
	}
	return places, nil
}

// followTar checks the real places of an upload's paths (checkTarPaths)
// against the write rules, which decided them by their names (decideTar),
// as the writing of each will: a place a rule refuses, reached through a
// link, refuses the whole upload before anything is written.
func (s *Session) followTar(places map[string]string, entries []*tarEntry, decided map[string]harness.Decision) error {
	file := make(map[string]bool, len(entries))
	for _, e := range entries {
		file[e.rel] = e.typ != tar.TypeDir
	}
	rels := make([]string, 0, len(places))
	for rel := range places {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	for _, rel := range rels {
		op := sandbox.WriteMkdir
		if file[rel] {
			op = sandbox.WriteFile
		}
		if err := s.followWrite(op, rel, places[rel], decided[rel]); err != nil {
			return err
		}
	}
	return nil
}
