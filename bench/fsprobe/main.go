// Command fsprobe measures, in a directory, the two file-system operations
// whose cost decides what moat's overlay workspace adds at start-up beyond
// the overlay mount itself, for bench/workspace.sh:
//
//	fsprobe [-n N] DIR
//
// prints one line: "MKDIR_RMDIR_MS REPLACE_MS" (medians of N, in ms):
//
//   - mkdir + rmdir of a directory: an overlay mount removes and recreates
//     its work directory's work/ every time;
//   - write 1 KiB to a new file + rename it over an existing one: moat
//     saves a change set's meta.json that way on every run.
//
// Both free a block. On ext4 without a journal, mounted with `discard`,
// each freed block waits for the device's discard, whose latency follows
// the other I/O of the machine; on tmpfs they cost microseconds.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

func main() {
	n := flag.Int("n", 100, "operations of each kind")
	flag.Parse()
	if flag.NArg() != 1 || *n < 1 {
		fmt.Fprintln(os.Stderr, "usage: fsprobe [-n N] DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	d := filepath.Join(dir, "fsprobe-dir")
	tmp := filepath.Join(dir, "fsprobe.tmp")
	dst := filepath.Join(dir, "fsprobe.json")
	data := make([]byte, 1024)
	defer os.Remove(d)
	defer os.Remove(tmp)
	defer os.Remove(dst)
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		fatal(err)
	}

	mk := make([]float64, 0, *n)
	for i := 0; i < *n; i++ {
		t := time.Now()
		if err := os.Mkdir(d, 0o700); err != nil {
			fatal(err)
		}
		if err := os.Remove(d); err != nil {
			fatal(err)
		}
		mk = append(mk, ms(time.Since(t)))
	}
	rp := make([]float64, 0, *n)
	for i := 0; i < *n; i++ {
		t := time.Now()
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			fatal(err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			fatal(err)
		}
		rp = append(rp, ms(time.Since(t)))
	}
	fmt.Printf("%.3f %.3f\n", median(mk), median(rp))
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func median(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "fsprobe:", err)
	os.Exit(1)
}
