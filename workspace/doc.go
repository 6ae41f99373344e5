// Package workspace owns moat's copy-on-write workspaces on the host side:
// change sets (an overlay upper layer kept in moat's state directory, with
// its session name, command history and conflict baseline), the review of
// a change set (Changes, and WriteDiff as a summary, a unified diff, a
// patch for `git apply`, or JSON), Apply (atomic per file, all-or-nothing
// across files through a journal, refusing files the host changed since
// the change set was created), Recover and Discard.
//
// It never mounts: the backend mounts the overlay (lowerdir = Workspace,
// upperdir = UpperDir, workdir = WorkDir, option userxattr) inside the
// sandbox's mount namespace, and this package only reads what the kernel
// left in the upper layer: whiteouts (character devices 0/0) and opaque
// directories (user.overlay.opaque=y). It never writes the real
// workspace except in Apply (and in Recover or Discard, which finish or
// roll back an interrupted Apply).
package workspace
