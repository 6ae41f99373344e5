// Package rt0 is the API of the moat binary's entry point on Linux (amd64
// and arm64; its code is in internal/rt0/entry, a package that imports
// nothing): a few instructions that run before the Go runtime does, and
// then jump to the runtime's own entry. The binary is linked with -ldflags=-E=_rt0_moat
// for them to run (the README's build command and bench/ do; this
// package's test builds a probe both ways); built without it, nothing here
// runs and nothing changes. On amd64 the entry point also pre-faults a
// command line's start (package entry says how and why).
//
// What they do is raise the timer slack of the process's first thread from
// the inherited value (usually 50 µs) to 500 µs (a coarser inherited one is
// kept). Every thread the runtime starts inherits it, first among them
// sysmon, its background thread, which sleeps only 20 µs at a time while
// it has had work in the last millisecond: during the runtime's and the packages' initialisation it
// woke every ~70 µs, each time a context switch on a machine whose two
// CPUs a start keeps busy. With the slack it wakes every ~0.5 ms. On this
// project's machine that makes `moat run -- /bin/true` 0.13–0.25 ms faster
// (bench/abtime), all of it before main; setting the slack in main, or in
// the first package initialised, gains nothing, because sysmon has
// started by then and the slack is per thread.
//
// main puts the first thread's slack back ([Restore]), and the sandbox's
// init sets its own to the value moat started with ([Slack]) before it
// starts the command, so that the command's timers are as precise as
// without moat. The threads the runtime started before main keep 500 µs,
// and a thread takes its creator's slack, so most threads the runtime
// starts later get it too: their timers (the wall-clock limit, a retried
// cgroup removal) may fire up to half a millisecond late, and when idle
// they take a goroutine that a busy thread has just started only after
// up to that long (the scheduler sleeps 3 µs before it takes one from its
// creator's runnext slot), so such a goroutine mostly runs once its
// creator blocks. That costs a relay of network traffic on every handoff,
// so a process that starts one (an allow-mode run or session) first puts
// the slack back on the threads it can reach ([RestoreThreads]).
//
// This is written by hand because no library does it: the Go toolchain
// offers no hook before the runtime starts other than the linker's entry
// symbol.
package rt0

import "github.com/moatbox/moat/internal/rt0/entry"

// Linked reports whether the entry point ran: the binary was linked with
// -E=_rt0_moat.
func Linked() bool { return entry.Entered != 0 }

// Slack returns the timer slack, in nanoseconds, that the process started
// with, or 0 when the entry point did not run (a binary linked without
// -E=_rt0_moat, such as a test binary or a program using moat as a
// library, or another platform): then no thread's slack was changed.
func Slack() uint64 { return entry.Slack }

// SetSlackForTesting makes Slack return ns, as if the entry point had seen
// it, until the returned function is called: for tests of the code that
// passes the slack on, whose test binaries are linked without the entry
// point.
func SetSlackForTesting(ns uint64) (undo func()) {
	old := entry.Slack
	entry.Slack = ns
	return func() { entry.Slack = old }
}
