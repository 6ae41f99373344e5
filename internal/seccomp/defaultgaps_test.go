package seccomp

import (
	"slices"
	"strings"
	"testing"
)

// TestDefaultGaps: a profile that allows everything is told to allow what
// moat's default profile refuses beyond the floor (bpf, mount,
// packet sockets, a personality without address-space randomisation),
// and not what the floor refuses, which FloorGaps lists. The default
// profile itself has no such gaps, and neither has the strict one (the
// controls: the probes are refused where they should be).
func TestDefaultGaps(t *testing.T) {
	open, err := Summarize(&Profile{DefaultAction: Allow}, ArchX86_64)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bpf", "mount", "perf_event_open", "userfaultfd", "socket (packet sockets", "personality (other personalities"} {
		if !slices.ContainsFunc(open.DefaultGaps, func(g string) bool { return strings.HasPrefix(g, want) }) {
			t.Errorf("an open profile's default gaps lack %q: %v", want, open.DefaultGaps)
		}
	}
	for _, g := range open.DefaultGaps {
		if strings.HasPrefix(g, "ptrace") || strings.HasPrefix(g, "unshare") || strings.HasPrefix(g, "io_uring") || strings.HasPrefix(g, "keyctl") {
			t.Errorf("default gap %q is the floor's, listed in FloorGaps", g)
		}
	}
	for name, p := range map[string]*Profile{"default": Default(), "strict": Strict()} {
		s, err := Summarize(p, ArchX86_64)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.DefaultGaps) > 0 {
			t.Errorf("%s: default gaps %v", name, s.DefaultGaps)
		}
	}
}
