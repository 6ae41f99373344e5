//go:build linux && !amd64

package native

// shareVM: without a clone trampoline for this architecture (only amd64
// has one, direct_linux_amd64.s), the direct start forks: its child
// shares the host's pages copy-on-write.
const shareVM = false

func rawClone(nr, a1, a2, arg uintptr) (pid uintptr, errno uintptr) {
	panic("rawClone: not on this architecture")
}
