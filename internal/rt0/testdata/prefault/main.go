// Command prefault is built by rt0's test with -ldflags=-E=_rt0_moat and
// without: it prints whether the entry point pre-faulted its start, the
// page faults that touching 64 new heap pages took, those that writing to
// 16 pages of its zeroed data took, and whether every page of its code was
// resident when main started.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/moatbox/moat/internal/rt0/entry"
)

// table is zeroed data with pointers, so it is in .bss (a pointer-free
// array would be in .noptrbss, which the entry point leaves alone).
var table [8192]*int

func minflt() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
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
	resident := codeResident()
	keep := make([]*[4096]byte, 64)
	before := minflt()
	for i := range keep {
		keep[i] = new([4096]byte)
		keep[i][0] = 1
	}
	faults := minflt() - before
	before = minflt()
	one := new(int)
	for i := 0; i < len(table); i += 512 {
		table[i] = one
	}
	dataFaults := minflt() - before
	fmt.Println(entry.Prefaulted(), faults, dataFaults, resident)
}
