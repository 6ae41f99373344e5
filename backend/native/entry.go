package native

import "github.com/moatbox/moat/internal/rt0"

// RestoreTimerSlack sets the calling thread's timer slack back to the one
// the process started with, which moat's entry point raised for the
// runtime's start (internal/rt0 says why). The moat binary's main calls it
// first thing, so that timers main's thread sets are as precise as
// without the entry point; a binary linked without that entry point has
// nothing to restore, and the call does nothing.
func RestoreTimerSlack() { rt0.Restore() }
