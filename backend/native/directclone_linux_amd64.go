package native

// shareVM: on amd64 the direct start's child shares the host's address
// space (CLONE_VM) and runs on a stack of its own, through rawClone
// (direct_linux_amd64.s). A forked child (the other architectures, see
// directclone_linux_other.go) shares the host's pages copy-on-write
// instead, and every page the host's Go runtime then writes to is copied
// for as long as the run lasts: about 1 ms of page faults per run here,
// plus copying the host's page tables at each fork.
const shareVM = true

// rawClone is implemented in direct_linux_amd64.s.
func rawClone(nr, a1, a2, arg uintptr) (pid uintptr, errno uintptr)
