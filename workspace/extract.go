package workspace

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Extract writes the tar archive r, made by a sandbox (a session's
// directory, as `moat cp SESSION:DIR HOSTDIR` downloads it), beneath the
// host directory dir: directories, regular files and symbolic links (as
// links); other entries are left out and reported to warn. os.Root
// refuses every way out of dir, a file replaces a link of its name
// rather than writing through it, and an entry beneath a link (one the
// archive made, or one dir had) is left out.
//
// What a sandbox wrote must not run on the host by itself afterwards, as
// Apply holds for a change set: unless force, an entry host tools read as
// configuration or run on their own wherever it is (HostRun) is left out
// and reported, and so is a git directory's config or hooks that the
// extraction put in a directory git takes for a repository (a bare
// layout: HEAD, objects and refs). Extract returns what it left out for
// that reason, in the archive's order.
func Extract(r io.Reader, dir string, force bool, warn func(name, why string)) (left []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	leave := func(name, why string) {
		left = append(left, name)
		warn(name, why)
	}
	var gitEntries []string // entries named as a git directory's, checked at the end
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return left, err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if strings.HasPrefix(h.Name, "/") || name == ".." || strings.HasPrefix(name, "../") {
			return left, fmt.Errorf("the archive names %q, outside the directory", h.Name)
		}
		if name == "." {
			continue
		}
		if why, ok := HostRun(name); ok && !force {
			leave(name, why)
			continue
		}
		// Nothing is written through a link, the archive's own or one
		// already there: the protected names are checked on the name as
		// written, and h -> .git/hooks then h/pre-commit would land in
		// the hooks (found by a tester), --force or not.
		if l := linkAbove(root, name); l != "" {
			leave(name, "it lies beneath "+l+", a symbolic link, and is not written through it")
			continue
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return left, err
			}
		}
		perm := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, perm|0o700); err != nil {
				return left, err
			}
		case tar.TypeReg:
			root.Remove(name) // a link of that name is replaced, not written through
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
			if err != nil {
				return left, err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return left, err
			}
		case tar.TypeSymlink:
			if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return left, err
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				return left, err
			}
		default:
			warn(name, "not a file, directory or link")
			continue
		}
		// The entry, or a directory it was made in, named as a git
		// directory's (an archive need not list hooks/ before
		// hooks/pre-commit).
		parts := strings.Split(name, "/")
		for i, part := range parts {
			if p := strings.Join(parts[:i+1], "/"); slices.Contains(gitDirEntries, part) && !slices.Contains(gitEntries, p) {
				gitEntries = append(gitEntries, p)
				break
			}
		}
	}
	if force {
		return left, nil
	}
	// A bare repository's layout is known only once the whole archive is
	// out (HEAD may come after config): nothing runs git meanwhile.
	for _, name := range gitEntries {
		if _, err := root.Lstat(name); err != nil {
			continue // removed with a directory above it
		}
		if !isGitDirAt(filepath.Join(dir, filepath.FromSlash(path.Dir(name)))) {
			continue
		}
		if err := root.RemoveAll(name); err != nil {
			return left, fmt.Errorf("remove %s from a git directory's layout: %w", name, err)
		}
		leave(name, "a git directory's "+path.Base(name)+" (the directory has HEAD, objects and refs), which git reads and runs")
	}
	return left, nil
}

// linkAbove returns the first directory on name's way below root that is
// a symbolic link, or "".
func linkAbove(root *os.Root, name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		if fi, err := root.Lstat(name[:i]); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return name[:i]
		}
	}
	return ""
}

// HostRun reports whether rel (clean, slash-separated, relative to any
// host directory) is a path that host tools read as configuration or run
// on their own wherever it is, with why: a .git anywhere (git reads its
// config and runs its hooks once a person is inside), or one of
// HostConfig's names at any depth or below one (direnv, editors, npm and
// cargo look for theirs in every directory up from where they run).
func HostRun(rel string) (string, bool) {
	parts := strings.Split(rel, "/")
	if slices.Contains(parts, ".git") {
		return "a git directory, whose config and hooks git reads and runs", true
	}
	for _, q := range hostConfig {
		qp := strings.Split(q, "/")
		for i := 0; i+len(qp) <= len(parts); i++ {
			if slices.Equal(parts[i:i+len(qp)], qp) {
				return q + ", which host tools read as configuration or run", true
			}
		}
	}
	return "", false
}
