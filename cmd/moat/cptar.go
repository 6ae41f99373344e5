package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/workspace"
)

// moat cp of directories: a tar archive both ways (the daemon checks what
// it is sent; what it sends is extracted by workspace.Extract).

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
			// The name may be a sandboxed command's (a direct workspace).
			fmt.Fprintf(stderr, "moat cp: left out %s: not a file, directory or link\n", workspace.QuoteName(p))
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
		// Not a FIFO put there since the walk looked, which would hold
		// the copy forever.
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("%s: changed while being copied", workspace.QuoteName(p))
		}
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
func cpDirFrom(c *client.Client, id, spath, dst string, force bool, stdout, stderr io.Writer) int {
	ctx := context.Background()
	if dst == "-" {
		out, done := terminalOutput(stdout, stderr, "cp")
		err := c.DownloadTar(ctx, id, spath, out)
		done()
		if lo := (*client.LeftOutError)(nil); errors.As(err, &lo) {
			return leftOutUnread(stderr, lo)
		}
		if err != nil {
			return apiFail(stderr, "cp", err, "")
		}
		return 0
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var left []string
	go func() {
		var err error
		left, err = workspace.Extract(pr, dst, force, func(name, why string) {
			fmt.Fprintf(stderr, "moat cp: left out %s: %s\n", workspace.QuoteName(name), why)
		})
		pr.CloseWithError(err)
		done <- err
	}()
	err := c.DownloadTar(ctx, id, spath, pw)
	lo := (*client.LeftOutError)(nil)
	if errors.As(err, &lo) {
		pw.Close() // the archive is whole but for them
	} else {
		pw.CloseWithError(err)
	}
	xerr := <-done
	if err != nil && lo == nil && xerr == nil {
		return apiFail(stderr, "cp", err, "")
	}
	if xerr != nil {
		fmt.Fprintf(stderr, "moat cp: %s\n", workspace.EscapeText(xerr.Error()))
		return exitMoatError
	}
	// The rest is copied; the status says it is not all.
	if len(left) > 0 {
		fmt.Fprintf(stderr, "moat cp: left out %d path(s) (above); review them in the session: --force takes those host tools would read or run on their own, never what lies beneath a link\n", len(left))
	}
	if lo != nil {
		return leftOutUnread(stderr, lo)
	}
	if len(left) > 0 {
		return exitMoatError
	}
	return 0
}

// leftOutUnread says which entries of a download the daemon could not
// read, and returns the status that says the copy is not whole.
func leftOutUnread(stderr io.Writer, lo *client.LeftOutError) int {
	for i, p := range lo.Paths {
		fmt.Fprintf(stderr, "moat cp: left out %s: the daemon could not read it (%s)\n", workspace.QuoteName(p), workspace.EscapeText(lo.Why[i]))
	}
	if more := lo.Count - len(lo.Paths); more > 0 {
		fmt.Fprintf(stderr, "moat cp: and %d more the daemon could not read\n", more)
	}
	fmt.Fprintf(stderr, "moat cp: the rest is copied; give the daemon's user read access to them in the session (chmod) and copy again\n")
	return exitMoatError
}
