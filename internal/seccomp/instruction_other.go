//go:build !linux

package seccomp

// Instruction is one classic BPF instruction (struct sock_filter); on Linux
// it is golang.org/x/sys/unix.SockFilter.
type Instruction struct {
	Code uint16
	Jt   uint8
	Jf   uint8
	K    uint32
}
