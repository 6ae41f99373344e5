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
// pipe has none of that: it exists only as the stream. The backends give
// a command its caller's stdin as it is only when Anonymous says so, and
// copy any other into a pipe of their own.
package pipefd
