package gvisor_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/backendtest"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/internal/proctest"
)

// TestSessionDiesWithCaller: when the process holding a gvisor session
// is killed (SIGKILL: no clean-up of its own), runsc, the sandbox and the
// command die with it; the next sandbox made on this host removes what
// the dead one left in the temporary directory. The control: while the
// caller lives, its command and runsc are there to find.
func TestSessionDiesWithCaller(t *testing.T) {
	usable(t)
	ws := backendtest.Workspace(t)
	tmp := t.TempDir()
	os.Chmod(tmp, 0o755)
	t.Setenv("TMPDIR", tmp)
	id := fmt.Sprintf("dies%d", time.Now().UnixNano()%1e9)
	c := exec.Command("/proc/self/exe", "-test.run=^$")
	c.Env = append(os.Environ(), "MOAT_TEST_GVISOR_CALLER="+ws, "MOAT_TEST_GVISOR_ID="+id)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		c.Process.Kill()
		c.Wait()
		t.Fatalf("caller: %q", line)
	}
	find := func() []int { return append(proctest.Find("4244.4244"), proctest.Find("moat-"+id)...) }
	if len(find()) == 0 {
		t.Error("control: no process of the live session found")
	}
	c.Process.Kill()
	c.Wait()
	if left := proctest.Gone(find, 10*time.Second); len(left) > 0 {
		t.Errorf("processes outlived their caller: %v", left)
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, "moat-gvisor-*"))
	if len(dirs) == 0 {
		t.Error("control: the dead caller's directory is not there to sweep")
	}
	spec := backendtest.BaseSpec(ws, "/bin/true")
	if st, err := (&gvisor.Backend{}).Run(context.Background(), spec, backend.Stdio{}); err != nil || st.ExitCode != 0 {
		t.Fatalf("the next run: %+v %v", st, err)
	}
	left, _ := os.ReadDir(tmp)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if len(names) > 0 {
		t.Errorf("left in TMPDIR after the next run: %s", strings.Join(names, " "))
	}
}
