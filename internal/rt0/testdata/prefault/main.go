// Command prefault is built by rt0's test with -ldflags=-E=_rt0_moat and
// without: it prints whether the entry point pre-faulted its start, the
// share of resident pages in the heap ahead of it when main starts (the
// part the entry package mapped, or else the 256 KiB after a new
// allocation), the page faults that writing to 16 pages of its zeroed
// data took, and whether every page of its code was resident.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/moatbox/moat/internal/rt0/entry"
)

// sink keeps the control's allocation on the heap.
var sink *[16]byte

// residentShare is the share of the pages of [start, start+n) that are
// resident (mincore), in percent, or -1 when it cannot tell.
func residentShare(start, n uintptr) int {
	vec := make([]byte, n/4096)
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, start, n, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return -1
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return in * 100 / len(vec)
}

// table is zeroed data with pointers, so it is in .bss (a pointer-free
// array would be in .noptrbss, which the entry point leaves alone).
var table [8192]*int

// minflt is the calling thread's minor page faults (RUSAGE_THREAD): the
// runtime's other threads fault on memory of their own meanwhile, more
// often on a loaded machine, and are not what is measured.
func minflt() int64 {
	const rusageThread = 1
	var ru syscall.Rusage
	syscall.Getrusage(rusageThread, &ru)
	return ru.Minflt
}

// codeResident reports whether the executable's code mapping is wholly
// resident (its Rss equals its Size in /proc/self/smaps).
func codeResident() bool {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return false
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var in bool
	var size int
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 6 && strings.Contains(fields[0], "-"):
			in = strings.HasPrefix(fields[1], "r-x") && fields[5] == exe
		case in && fields[0] == "Size:":
			size, _ = strconv.Atoi(fields[1])
		case in && fields[0] == "Rss:":
			rss, _ := strconv.Atoi(fields[1])
			return size > 0 && rss == size
		}
	}
	return false
}

func main() {
	start, n := entry.HeapAhead()
	if n == 0 {
		sink = new([16]byte)
		start, n = uintptr(unsafe.Pointer(sink))&^4095, 256<<10
	}
	heap := residentShare(start, n)
	resident := codeResident()
	one := new(int)
	runtime.LockOSThread()
	before := minflt()
	for i := 0; i < len(table); i += 512 {
		table[i] = one
	}
	dataFaults := minflt() - before
	fmt.Println(entry.Prefaulted(), heap, dataFaults, resident)
}
