//go:build !linux

package sandbox

import "syscall"

// procAttr starts a secret's program as the leader of a process group of
// its own (secretCommand).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
