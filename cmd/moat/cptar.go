package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/moatbox/moat/client"
)

// moat cp of directories: a tar archive both ways (the daemon checks what
// it is sent; what it sends is extracted beneath the host directory,
// os.Root refusing every way out).

// writeTar writes the host directory dir to w: files, directories and
// symbolic links (as links); other files are left out, with a warning.
// Set-id bits are not sent: the daemon refuses them.
func writeTar(w io.Writer, dir string, stderr io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.IsDir(), fi.Mode().IsRegular():
		default:
			fmt.Fprintf(stderr, "moat cp: left out %s: not a file, directory or link\n", p)
			return nil
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Mode &= 0o777
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, h.Size)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// extractTar writes the archive r beneath the host directory dir (made
// when missing): names that are absolute or hold `..` are refused, and
// os.Root keeps every write, links included, beneath dir.
func extractTar(r io.Reader, dir string, stderr io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if strings.HasPrefix(h.Name, "/") || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("the archive names %q, outside the directory", h.Name)
		}
		if name == "." {
			continue
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		perm := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, perm|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			root.Remove(name) // a link of that name is replaced, not written through
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				return err
			}
		default:
			fmt.Fprintf(stderr, "moat cp: left out %s: not a file, directory or link\n", h.Name)
		}
	}
}

// cpDirTo copies the host directory src into the session's directory
// dpath.
func cpDirTo(c *client.Client, src, id, dpath string, stderr io.Writer) int {
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		err := writeTar(pw, src, stderr)
		pw.CloseWithError(err)
		werr <- err
	}()
	_, err := c.UploadTar(context.Background(), id, dpath, pr)
	pr.Close()
	if e := <-werr; e != nil && !errors.Is(e, io.ErrClosedPipe) {
		fmt.Fprintf(stderr, "moat cp: %v\n", e)
		return exitMoatError
	}
	if err != nil {
		return apiFail(stderr, "cp", err, "")
	}
	return 0
}

// cpDirFrom copies the session's directory spath into the host directory
// dst, or to stdout as a tar archive when dst is "-".
func cpDirFrom(c *client.Client, id, spath, dst string, stdout, stderr io.Writer) int {
	ctx := context.Background()
	if dst == "-" {
		if err := c.DownloadTar(ctx, id, spath, stdout); err != nil {
			return apiFail(stderr, "cp", err, "")
		}
		return 0
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := extractTar(pr, dst, stderr)
		pr.CloseWithError(err)
		done <- err
	}()
	err := c.DownloadTar(ctx, id, spath, pw)
	pw.CloseWithError(err)
	xerr := <-done
	if err != nil && xerr == nil {
		return apiFail(stderr, "cp", err, "")
	}
	if xerr != nil {
		fmt.Fprintf(stderr, "moat cp: %v\n", xerr)
		return exitMoatError
	}
	return 0
}
