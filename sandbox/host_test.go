package sandbox_test

import (
	"os"
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestCheckSeccompProfile: the check refuses what a run refuses (a
// profile under which no program can start), and accepts, with its
// summary, a profile a run accepts.
func TestCheckSeccompProfile(t *testing.T) {
	arch := sandbox.SeccompNativeArch()
	if arch == "" {
		t.Skip("moat compiles no seccomp filters for this architecture")
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noExec := write("noexec.json", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["execve"], "action": "SCMP_ACT_ERRNO"}]}`)
	if _, err := sandbox.CheckSeccompProfile(noExec, arch); err == nil || !strings.Contains(err.Error(), "no program can start under this profile") {
		t.Errorf("a profile refusing execve: %v, want it refused", err)
	}
	noMkdir := write("nomkdir.json", `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}`)
	c, err := sandbox.CheckSeccompProfile(noMkdir, arch)
	if err != nil || c.Builtin || c.Default != "allow" || c.Denied["EACCES"] != 1 {
		t.Errorf("a profile refusing mkdir: %+v %v, want it accepted with one call denied EACCES", c, err)
	}
	if c, err := sandbox.CheckSeccompProfile(policy.ProfileStrict, arch); err != nil || !c.Builtin || len(c.FloorGaps) != 0 {
		t.Errorf("strict: %+v %v", c, err)
	}
	if _, err := sandbox.CheckSeccompProfile(policy.ProfileDefault, "riscv64"); err == nil {
		t.Error("riscv64 accepted: moat compiles no filters for it")
	}
}
