package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

const seccompUsage = `usage: moat seccomp check [-v] [--arch ARCH] FILE

Validates a Docker-format seccomp profile (exit 0, or 125 with every problem)
and summarises what it allows and denies on this host's architecture. FILE may
also be "default" or "strict", moat's built-in profiles (write ./default for a
file of that name).
`

// cmdSeccomp is `moat seccomp check FILE`.
func cmdSeccomp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprint(stderr, seccompUsage)
		return 2
	}
	fs := flag.NewFlagSet("seccomp check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, seccompUsage); fs.PrintDefaults() }
	verbose := fs.Bool("v", false, "also list the rules left out by their conditions and the names of other architectures")
	arch := fs.String("arch", sandbox.SeccompNativeArch(), "architecture to summarise for: x86_64 or aarch64")
	if ok, code := parseFlags(fs, args[1:], stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, seccompUsage)
		return 2
	}
	name := fs.Arg(0)
	s, err := sandbox.CheckSeccompProfile(name, *arch)
	if err != nil {
		fmt.Fprintf(stderr, "moat: %v\n", err)
		return exitMoatError
	}
	floor := "a valid Docker-format profile"
	switch name {
	case policy.ProfileDefault:
		floor = "moat's default profile: a deny-list, allowing what it does not list"
	case policy.ProfileStrict:
		floor = "moat's strict profile: an allow-list, refusing what it does not list with EPERM"
	}

	w := func(format string, args ...any) { fmt.Fprintf(stdout, format, args...) }
	w("%s: %s\n", name, floor)
	w("  default action: %s\n", s.Default)
	archLine := s.Arch
	if len(s.FileArches) > 0 {
		archLine += " (the file lists " + strings.Join(s.FileArches, ", ") + ")"
	}
	w("  architecture:   %s; moat kills system calls of every other architecture and ABI (x32, 32-bit)\n", archLine)
	w("  system calls:   %d on %s: %d allowed, %s, %d killed, %d other (trap, log)\n",
		s.Total, s.Arch, s.Allowed, denied(s.Denied), s.Killed, s.Other)
	if len(s.Conditional) > 0 {
		w("  argument rules:\n")
		for _, c := range s.Conditional {
			w("    %s\n", c)
		}
	}
	if !s.Builtin {
		w("  left out:       %d rules whose conditions do not hold in moat's sandbox (no capabilities, %s, kernel %s)\n",
			len(s.Dropped), s.Arch, s.Kernel)
		w("  skipped:        %d names of system calls that %s does not have\n", len(s.Skipped), s.Arch)
		if *verbose {
			for _, d := range s.Dropped {
				w("    left out: %s\n", d)
			}
			if len(s.Skipped) > 0 {
				w("    skipped: %s\n", strings.Join(s.Skipped, " "))
			}
		}
	}
	if !s.Builtin && len(s.DefaultGaps) > 0 {
		w("  beyond default: this profile allows what moat's default profile refuses: %s.\n", strings.Join(s.DefaultGaps, ", "))
	}
	switch {
	case s.Builtin:
		if len(s.FloorGaps) > 0 { // a bug in moat's own profiles
			w("  floor:          allows what the floor refuses: %s\n", strings.Join(s.FloorGaps, ", "))
			return exitMoatError
		}
		w("  floor:          refuses everything moat's floor refuses, and runs alone\n")
	case len(s.FloorGaps) > 0:
		w("  floor:          this profile allows what moat's floor refuses: %s.\n", strings.Join(s.FloorGaps, ", "))
		w("                  The floor stays in force under it as a second filter, so these are refused anyway;\n")
		w("                  only syscalls.profile = \"unconfined\" removes it.\n")
	default:
		w("  floor:          refuses everything moat's floor refuses; the floor stays in force under it anyway\n")
	}
	return 0
}

// denied is "12 denied (EPERM 11, ENOSYS 1)".
func denied(by map[string]int) string {
	total := 0
	var parts []string
	for errno, n := range by {
		total += n
		parts = append(parts, fmt.Sprintf("%s %d", errno, n))
	}
	sort.Strings(parts)
	if total == 0 {
		return "0 denied"
	}
	return fmt.Sprintf("%d denied (%s)", total, strings.Join(parts, ", "))
}
