// Package pipefd tells an anonymous pipe from every other open file, for
// the backends deciding what of their caller's stdin a sandboxed command
// may hold.
//
// An open file is an inode of the host, and its descriptor carries more
// than its contents: whoever holds it can change the file's mode, times
// and extended attributes (fchmod, or chmod of /proc/self/fd/N, which
// Landlock does not cover), reopen it through /proc/self/fd/N with more
// access than it was given, and, for a directory, list it and open files
// and parents ("..") from it, outside every mount of a sandbox; runsc,
// given a file as a container's stdio, changes its owner. An anonymous
// pipe has little of that, but it can be reopened through
// /proc/self/fd/N too, for writing as well, by a process its mode lets
// open it: one of the uid that made it. A command of an ordinary user
// runs as that user, so it could write into the caller's stdin pipe what
// a host process reading the same pipe after moat (a shell in `... |
// bash`, a `while read` loop) then runs. The backends give a command its
// caller's stdin as it is only when Passable says so (a pipe made by
// another uid than the command's, or /dev/null), and copy any other into
// a pipe of their own.
package pipefd
