package seccomp

import "slices"

// Every run compiles the built-in profile it uses, and a run is a fresh
// process: compiling cold costs about 0.2 ms here, most of it building the
// system-call tables (maps of some 1,000 names) that validation and
// compilation look names up in. The programs of the built-in profiles are
// therefore generated at build time (zprograms.go, written and checked by
// TestPrograms), and Compile returns the stored program when the profile
// it is given is, rule for rule, one of them. What decides is a hash of
// everything the program depends on (see fingerprint), not where the
// profile came from: a built-in profile changed after Default returned it
// hashes differently and is compiled afresh, so a stored program can never
// stand in for rules it was not made from.

// program is a stored Compile result: the program of the profile whose
// fingerprint is sum, for arch.
type program struct {
	sum  uint64
	arch string
	prog []Instruction
}

// precompiled returns a copy of the stored program of p for arch, or nil.
func precompiled(p *Profile, arch string) []Instruction {
	sum := fingerprint(p)
	for i := range programs {
		if programs[i].sum == sum && programs[i].arch == arch {
			return slices.Clone(programs[i].prog)
		}
	}
	return nil
}

// fingerprint hashes (64-bit FNV-1a) every field of p that Compile reads:
// the default action and errno, the architectures, and each rule's names,
// action, errno and argument conditions, in order. Comments are left out:
// they do not change the program. Lengths are hashed before lists, so that
// moving a name from one rule to the next changes the sum.
func fingerprint(p *Profile) uint64 {
	h := uint64(14695981039346656037)
	num := func(v uint64) {
		for i := 0; i < 8; i++ {
			h ^= v & 0xff
			h *= 1099511628211
			v >>= 8
		}
	}
	str := func(s string) {
		num(uint64(len(s)))
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
	}
	num(uint64(p.DefaultAction))
	num(uint64(p.DefaultErrno))
	num(uint64(len(p.Arches)))
	for _, a := range p.Arches {
		str(a)
	}
	num(uint64(len(p.Rules)))
	for _, r := range p.Rules {
		num(uint64(len(r.Names)))
		for _, n := range r.Names {
			str(n)
		}
		num(uint64(r.Action))
		num(uint64(r.Errno))
		num(uint64(len(r.Args)))
		for _, a := range r.Args {
			num(uint64(a.Index))
			num(a.Value)
			num(a.ValueTwo)
			num(uint64(a.Op))
		}
	}
	return h
}
