//go:build linux

package native_test

import "golang.org/x/sys/unix"

func setPC(r *unix.PtraceRegs, pc uint64) { r.Pc = pc }
