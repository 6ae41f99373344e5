// Package relpath resolves a relative path inside a tree as the kernel
// would, each symbolic link on the way followed, without touching the
// tree itself: the caller says what is a link (Link), so the tree can be
// a view no single directory holds (an overlay's layers merged, or a
// workspace as an upload will leave it). It owns the walk and its two
// refusals (out of the tree, a loop); it refuses to decide anything
// about the places it reaches, which is its callers' business.
//
// The walk is sound for escapes: a path the kernel resolves outside the
// root must, at some step, apply ".." at the root or follow an absolute
// target, and the walk makes every step the kernel makes, applying ".."
// to the real place reached, never to the name.
package relpath

import (
	"errors"
	"path"
	"strings"
)

// MaxHops is how many links one resolution follows, as the kernel's
// bound (MAXSYMLINKS).
const MaxHops = 40

var (
	// ErrOut: the walk goes above the root or meets an absolute target.
	ErrOut = errors.New("leads out of the workspace")
	// ErrLoop: the walk follows more than MaxHops links.
	ErrLoop = errors.New("meets too many links (a loop)")
)

// Link says whether the place p (clean, relative to the root) is a
// symbolic link in the view, and its target. within says the walk goes
// on beneath p. An error stops the walk and is returned as it is.
type Link func(p string, within bool) (target string, isLink bool, err error)

// Resolve returns the real place of rel from the real directory from
// ("." for the root): clean, relative to the root, every link on its way
// followed, the last component's too. A place that does not exist ends
// nothing: the walk goes on lexically beneath it.
func Resolve(from, rel string, link Link) (string, error) {
	todo := strings.Split(rel, "/")
	real := from
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if real == "." {
				return "", ErrOut
			}
			real = path.Dir(real)
			continue
		}
		p := c
		if real != "." {
			p = real + "/" + c
		}
		target, isLink, err := link(p, len(todo) > 0)
		if err != nil {
			return "", err
		}
		if !isLink {
			real = p
			continue
		}
		if hops++; hops > MaxHops {
			return "", ErrLoop
		}
		if strings.HasPrefix(target, "/") {
			return "", ErrOut
		}
		// The target is resolved from the link's directory, real already.
		todo = append(strings.Split(target, "/"), todo...)
	}
	return real, nil
}
