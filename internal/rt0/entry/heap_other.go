//go:build !(linux && amd64)

package entry

// HeapAhead returns 0, 0: the heap is pre-faulted on Linux amd64 only.
func HeapAhead() (start, n uintptr) { return 0, 0 }
