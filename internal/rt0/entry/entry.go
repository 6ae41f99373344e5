// Package entry holds the moat binary's code that runs first: the linker's
// entry point, _rt0_moat, before the Go runtime starts (its assembly is
// here), and the first package initialiser after the runtime's own. It
// stores what the entry point saw; internal/rt0 is the API the rest of
// moat uses, and its doc says what the entry point does to the timer
// slack and why.
//
// # Pre-faulting a front-end process's start
//
// On amd64 the entry point also decides whether this process is one a
// person or a program waits for (moat run, moat exec, any command line of
// the binary) or one of moat's own helpers, which the binary starts with
// an argv[0] beginning "moat-" (a sandbox's init, the id-mapping holder,
// gVisor's forwarder and gate). For the former it maps at once, in one
// system call each, what its start would otherwise fault in page by page:
//   - the binary's code and its read-only data but for the function tables
//     (MADV_POPULATE_READ; the pages are in the page cache). The function
//     tables (pclntab, read to walk stacks) are the largest part, and
//     mapping them too would take a one-shot run's resident memory past
//     its goal for a small gain. The type data, which the initialisers
//     read throughout, is mapped wherever the linker put it: inside
//     .rodata up to Go 1.26, after the function tables from Go 1.27 on;
//   - its initialised data and its small zeroed data (.noptrdata, .data,
//     .bss; MADV_POPULATE_WRITE), each page copied once: otherwise a first
//     read maps the page from the file and the first write copies it with
//     a second fault, which also flushes the page from every CPU's TLB.
//     .noptrbss is left alone: it holds large arrays that are mostly never
//     touched (crypto/internal/fips140/drbg's 32 MiB);
//   - in this package's initialiser, the next part of the heap
//     (MADV_POPULATE_WRITE), which the other packages' initialisers and
//     the command then use.
//
// Why: on virtual machines whose page faults exit to the hypervisor a
// fault costs many times what the same page costs when it is mapped in a
// batch, and a Go binary of moat's size takes several hundred faults to
// start, most of them before main; on this project's machines that was a
// large part of a one-shot run's CPU time and of its gap to bubblewrap
// (docs/performance.md has the numbers). The cost is resident memory: the
// code's pages are shared with the page cache, and the heap's part is
// small. Helpers are left out because a session's init lives as long as
// the session and the memory of an idle session is counted: its pages
// stay faulted in lazily.
//
// The package imports nothing, so that its initialiser runs before those
// of the packages that allocate the most at start (Go initialises a
// package once its imports are, in the order of import paths). It is
// written by hand because no library does this: the Go toolchain offers
// no hook before the runtime starts other than the linker's entry symbol,
// and the runtime has no option to pre-fault its heap.
package entry

// Slack is the first thread's timer slack when the process started, in
// nanoseconds, stored by the entry point; 0 when it did not run.
var Slack uint64

// Entered is set to 1 by the entry point.
var Entered uint32

// front is set to 1 by the entry point when it pre-faulted the binary:
// the process is not one of moat's helpers (see the package doc).
var front uint32

// Prefaulted reports whether the entry point pre-faulted this process's
// start (amd64, not a helper).
func Prefaulted() bool { return front != 0 }
