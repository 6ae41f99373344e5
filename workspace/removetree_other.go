//go:build !linux

package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
)

// RemoveTree removes dir, a tree a sandboxed command may have made, as
// os.RemoveAll does, after making its directories writable and searchable
// to their owner: the kernel's work/work is mode 0, and a command may have
// left directories it cannot be descended into. Every change of mode is
// made through an os.Root of dir, so a directory swapped for a symbolic
// link while the walk runs never has the mode of what it points to outside
// dir changed (os.Chmod by path would follow it).
func RemoveTree(dir string) error {
	// dir itself is named by the caller, in a directory the command cannot
	// write: only what is below it is the command's.
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		// Not a tree: a file, a link, a FIFO (which opening would wait
		// on for a writer for ever; found by a tester) or nothing.
		return os.RemoveAll(dir)
	}
	if fi.Mode().Perm()&0o700 != 0o700 {
		os.Chmod(dir, fi.Mode().Perm()|0o700)
	}
	if root, err := os.OpenRoot(dir); err == nil {
		// WalkDir calls the function on a directory before reading it, so
		// the chmod comes in time for the walk itself to descend.
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				if fi, e := d.Info(); e == nil && fi.Mode().Perm()&0o700 != 0o700 {
					if rel, e := filepath.Rel(dir, p); e == nil {
						root.Chmod(rel, fi.Mode().Perm()|0o700)
					}
				}
			}
			return nil
		})
		root.Close()
	}
	return os.RemoveAll(dir)
}

// DirSize is the disk space used by the tree at path, in bytes (allocated
// blocks; a file with several links in the tree counts once).
func DirSize(path string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		size, dev, ino, nlink := blocksOf(fi)
		if nlink > 1 && !fi.IsDir() {
			if seen[inode{dev, ino}] {
				return nil
			}
			seen[inode{dev, ino}] = true
		}
		total += size
		return nil
	})
	return total, err
}
