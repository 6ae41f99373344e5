package entry

import "unsafe"

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14; older kernels
// refuse it with EINVAL, and nothing is lost).
const madvPopulateWrite = 23

// heapAhead is how much of the heap, from the page of this package's first
// allocation on, is faulted in at once: about what the other packages'
// initialisers and a one-shot run use after it.
const heapAhead = 1 << 20

// heapMark is this package's first allocation, the point the heap is
// mapped ahead from; a package variable, so that it is made on the heap
// (a local one could live on the stack).
var heapMark *[16]byte

// heapStart is the first page mapped ahead (0 when none was).
var heapStart uintptr

func madvise(addr, n uintptr, advice uintptr) uintptr

// HeapAhead returns the part of the heap this package's initialiser asked
// the kernel to map, or 0, 0 when it did not (a helper, no entry point).
func HeapAhead() (start, n uintptr) {
	if heapStart == 0 {
		return 0, 0
	}
	return heapStart, heapAhead
}

func init() {
	if front == 0 {
		return
	}
	heapMark = new([16]byte)
	heapStart = uintptr(unsafe.Pointer(heapMark)) &^ 4095
	// Go's heap grows upwards from its arena's start, so the pages after the
	// newest allocation are the ones used next. What is past the part the
	// runtime has mapped is refused by the kernel, as is a call to an old
	// kernel: the faults then happen as they would have.
	madvise(heapStart, heapAhead, madvPopulateWrite)
}
