package sandbox

import (
	"fmt"

	"github.com/moatbox/moat/internal/seccomp"
)

// seccompProfiles turns syscalls.profile into the filters to stack.
func seccompProfiles(name string) ([]*seccomp.Profile, error) {
	switch name {
	case "", "default":
		return []*seccomp.Profile{seccomp.Default()}, nil
	case "unconfined":
		return nil, nil
	}
	return nil, fmt.Errorf("syscalls.profile %q is not supported yet; use \"default\" (moat's deny-list) or \"unconfined\"", name)
}
