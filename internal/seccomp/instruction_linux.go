package seccomp

import "golang.org/x/sys/unix"

// Instruction is one classic BPF instruction (struct sock_filter).
type Instruction = unix.SockFilter
