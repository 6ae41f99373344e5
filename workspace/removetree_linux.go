package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// removeTreeFDs bounds the directories RemoveTree holds open at once. A
// tree deeper than that has the subtree at that depth moved up to the
// top of the tree and removed from there, so that a tree of any depth is
// removed with a bounded number of descriptors and no path longer than a
// name: os.RemoveAll holds a descriptor for each level, and a command that
// made tens of thousands of nested directories left a change set that no
// discard could remove (too many open files; found by a tester).
const removeTreeFDs = 32

// RemoveTree removes dir, a tree a sandboxed command may have made, as
// os.RemoveAll does, however deep, after making each of its directories
// writable and searchable to their owner: the kernel's work/work is mode
// 0, and a command may have left directories it cannot be descended into.
// Every directory is opened by name in its parent's descriptor without
// following a symbolic link, and its mode changed through that
// descriptor, so a directory swapped for a link while the removal runs
// never has what the link points to changed or removed.
func RemoveTree(dir string) error {
	// dir itself is named by the caller, in a directory the command cannot
	// write: only what is below it is the command's.
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		// Not a tree: a file, a link, a FIFO (which opening would wait
		// on for a writer for ever; found by a tester) or nothing.
		return os.RemoveAll(dir)
	}
	top, err := openTreeDir(unix.AT_FDCWD, dir)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	err = emptyTree(top)
	top.Close()
	if err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return os.Remove(dir)
}

// openTreeDir opens the directory name of parent for reading, without
// following a link, made readable, writable and searchable to its owner
// first if it was not.
func openTreeDir(parent int, name string) (*os.File, error) {
	pfd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, err
	}
	// The descriptor's own name in /proc is the directory opened, whatever
	// its name in parent leads to by now.
	self := "/proc/self/fd/" + strconv.Itoa(pfd)
	if st.Mode&0o700 != 0o700 {
		if err := unix.Chmod(self, st.Mode&0o7777|0o700); err != nil && !errors.Is(err, unix.ENOENT) {
			return nil, err
		}
	}
	fd, err := unix.Open(self, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		// No /proc here: by name, still without following a link.
		fd, err = unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// treeDir is a directory emptyTree is emptying.
type treeDir struct {
	f    *os.File
	name string   // its name in the directory below it on the stack
	todo []string // names read and not yet removed
	// seen: this pass over the directory read entries; removed: how many
	// went. A pass that read entries and removed none is stuck.
	seen    bool
	removed int
}

// emptyTree removes everything in top, holding at most removeTreeFDs
// directories open.
func emptyTree(top *os.File) error {
	stack := []*treeDir{{f: top}}
	defer func() {
		for _, d := range stack {
			if d.f != top {
				d.f.Close()
			}
		}
	}()
	hoisted := 0
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		if len(d.todo) == 0 {
			names, err := d.f.Readdirnames(256)
			if err != nil && err != io.EOF {
				return err
			}
			if len(names) == 0 {
				if d.seen {
					// Read again from the start: entries moved in while
					// it was read (a subtree moved up to the top), or
					// the reading missed, are read then.
					if d.removed == 0 {
						return fmt.Errorf("%s: entries that cannot be removed", d.f.Name())
					}
					if _, err := d.f.Seek(0, io.SeekStart); err != nil {
						return err
					}
					d.seen, d.removed = false, 0
					continue
				}
				// Empty: gone from the directory below it.
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return nil // top itself stays, for the caller
				}
				d.f.Close()
				below := stack[len(stack)-1]
				if err := unix.Unlinkat(int(below.f.Fd()), d.name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
					return fmt.Errorf("%s: %w", d.name, err)
				}
				below.removed++
				continue
			}
			d.todo, d.seen = names, true
		}
		name := d.todo[0]
		d.todo = d.todo[1:]
		fd := int(d.f.Fd())
		err := unix.Unlinkat(fd, name, 0)
		switch {
		case err == nil || errors.Is(err, unix.ENOENT):
			d.removed++
			continue
		case !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM):
			// Linux answers EISDIR for a directory; EPERM is what POSIX
			// allows, and a file the kernel will not unlink gives it too
			// (the rmdir below then fails with ENOTDIR and says so).
			return fmt.Errorf("%s: %w", name, err)
		}
		rerr := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
		switch {
		case rerr == nil || errors.Is(rerr, unix.ENOENT):
			d.removed++
			continue
		case errors.Is(rerr, unix.ENOTDIR):
			return fmt.Errorf("%s: %w", name, err)
		case !errors.Is(rerr, unix.ENOTEMPTY) && !errors.Is(rerr, unix.EEXIST) && !errors.Is(rerr, unix.EACCES) && !errors.Is(rerr, unix.EPERM):
			return fmt.Errorf("%s: %w", name, rerr)
		}
		if len(stack) < removeTreeFDs {
			child, err := openTreeDir(fd, name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			stack = append(stack, &treeDir{f: child, name: name})
			continue
		}
		// As deep as it goes: the subtree moves up to the top, where a
		// later pass over the top removes it.
		for {
			to := ".moat-deep-" + strconv.Itoa(hoisted)
			hoisted++
			err := unix.Renameat2(fd, name, int(top.Fd()), to, unix.RENAME_NOREPLACE)
			if errors.Is(err, unix.EEXIST) {
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: move up: %w", name, err)
			}
			break
		}
		d.removed++
	}
	return nil
}

// DirSize is the disk space used by the tree at path, in bytes (allocated
// blocks; a file with several links in the tree counts once). It holds one
// directory open at a time, going back up by "..", and names nothing by
// a path: a tree deeper than a path can name is counted whole (a change
// set of nested directories showed a hundredth of its size).
func DirSize(path string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	total := st.Blocks * 512
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return total, nil
	}
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	cur, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return total, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer func() { unix.Close(cur) }()
	names := func(fd int) ([]string, error) {
		dup, err := unix.Dup(fd)
		if err != nil {
			return nil, err
		}
		unix.CloseOnExec(dup)
		f := os.NewFile(uintptr(dup), "")
		defer f.Close()
		return f.Readdirnames(-1)
	}
	first, err := names(cur)
	if err != nil {
		return total, err
	}
	// stack holds, for each directory from path down to the one open, the
	// names in it not yet counted.
	stack := [][]string{first}
	for len(stack) > 0 {
		todo := stack[len(stack)-1]
		if len(todo) == 0 {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				break
			}
			up, err := unix.Openat(cur, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return total, err
			}
			unix.Close(cur)
			cur = up
			continue
		}
		name := todo[0]
		stack[len(stack)-1] = todo[1:]
		if err := unix.Fstatat(cur, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if st.Nlink > 1 {
				if seen[inode{st.Dev, st.Ino}] {
					continue
				}
				seen[inode{st.Dev, st.Ino}] = true
			}
			total += st.Blocks * 512
			continue
		}
		total += st.Blocks * 512
		down, err := unix.Openat(cur, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // unreadable, or replaced meanwhile: its own blocks counted
		}
		list, err := names(down)
		if err != nil {
			unix.Close(down)
			continue
		}
		unix.Close(cur)
		cur = down
		stack = append(stack, list)
	}
	return total, nil
}
