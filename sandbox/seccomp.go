package sandbox

import (
	"fmt"
	"strings"

	"github.com/moatbox/moat/internal/seccomp"
	"github.com/moatbox/moat/policy"
)

// seccompProfiles turns syscalls.profile into the filters to stack on the
// command, in the order they are installed, and says whether the first is
// a custom profile, which the command installs just before its execve (see
// backend.Spec.SeccompAtExec). A custom profile under which no program
// can start is refused here.
//
// A Docker-format file gets moat's floor as a second filter: whatever the
// file allows, the command cannot make namespaces, inject terminal input,
// open MPTCP sockets, ptrace, use io_uring or make set-id files (which
// would keep their owner's rights on the host after the run). Strict
// holds the floor's rules itself.
// Policy.Resolve has already made a file's path absolute. The file is read
// through the policy, which hands over the content its trust check saw.
func seccompProfiles(p *policy.Policy) (profiles []*seccomp.Profile, atExec bool, err error) {
	profiles, atExec, err = policyProfiles(p)
	if err == nil && len(profiles) > 0 && p.Limits.FileSize > 0 {
		// The last: moat's own (the default, strict, or the floor under
		// a custom profile).
		last := len(profiles) - 1
		profiles[last] = seccomp.WithFileSizeLimit(profiles[last])
	}
	return profiles, atExec, err
}

// policyProfiles is seccompProfiles before the rules of the policy's
// limits.
func policyProfiles(p *policy.Policy) (profiles []*seccomp.Profile, atExec bool, err error) {
	name := p.Syscalls.Profile
	switch name {
	case "", policy.ProfileDefault:
		return []*seccomp.Profile{seccomp.Default()}, false, nil
	case policy.ProfileStrict:
		return []*seccomp.Profile{seccomp.Strict()}, false, nil
	case policy.ProfileUnconfined:
		return nil, false, nil
	}
	data, err := p.ReadFile(name)
	if err != nil {
		return nil, false, profileError(p, name, fmt.Errorf("read the seccomp profile: %w", err))
	}
	custom, err := seccomp.LoadDocker(name, data)
	if err != nil {
		return nil, false, profileError(p, name, err)
	}
	refused, err := seccomp.StartRefusals(custom, seccomp.NativeArch())
	if err != nil {
		return nil, false, profileError(p, name, err)
	}
	if len(refused) > 0 {
		return nil, false, profileError(p, name, seccomp.StartError(refused))
	}
	return []*seccomp.Profile{custom, seccomp.Floor()}, true, nil
}

// profileError is a problem with the seccomp profile file name, as an
// error of the policy's syscalls.profile (located at its file and line,
// or at --seccomp), with each of the file's own problems on a line of its
// own below it.
func profileError(p *policy.Policy, name string, err error) error {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimPrefix(l, name+": "); l != "" {
			lines = append(lines, "  "+l)
		}
	}
	return p.FieldError("syscalls.profile", name+":\n"+strings.Join(lines, "\n"))
}

// CheckPolicyProfile reads and checks p's syscalls.profile as a run
// would, for moat policy check: a file that is missing, malformed, or
// under which no program can start is an error of syscalls.profile.
func CheckPolicyProfile(p *policy.Policy) error {
	_, _, err := seccompProfiles(p)
	return err
}

// customProfileGaps warns, for a custom profile (named name) stacked on
// the floor, of what it lets through that moat's default profile refuses
// (bpf, mount, packet sockets, ...): a weakening the person chose, said as
// unconfined's is, not found only by moat seccomp check.
func customProfileGaps(name string, custom *seccomp.Profile) []string {
	s, err := seccomp.Summarize(custom, seccomp.NativeArch())
	if err != nil || len(s.DefaultGaps) == 0 {
		return nil
	}
	const shown = 6
	list := strings.Join(s.DefaultGaps[:min(shown, len(s.DefaultGaps))], ", ")
	if more := len(s.DefaultGaps) - shown; more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return []string{fmt.Sprintf("syscalls.profile %s allows what moat's default profile refuses: %s (moat seccomp check %s lists them; the floor still holds)", name, list, name)}
}
