package conventions

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPrometheusOnlyInTests: Prometheus's libraries check the daemon's
// metrics in tests and are linked into no program of the module, moat
// included: their package initialisers would slow every start (package
// promtext says by how much).
func TestPrometheusOnlyInTests(t *testing.T) {
	linked := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command("go", append([]string{"list", "-deps"}, args...)...).Output()
		if err != nil {
			t.Skipf("go list cannot load the module as uid %d (%v); the run as root checks this", os.Getuid(), err)
		}
		var prom []string
		for _, p := range strings.Fields(string(out)) {
			if strings.HasPrefix(p, "github.com/prometheus/") {
				prom = append(prom, p)
			}
		}
		return prom
	}
	if prom := linked(module + "/..."); len(prom) != 0 {
		t.Errorf("the module's packages link %v: Prometheus's libraries are for tests only", prom)
	}
	// Positive control: the same check finds them in promtext's tests.
	if prom := linked("-test", module+"/internal/promtext"); len(prom) == 0 {
		t.Error("the check does not see Prometheus's parser in promtext's tests")
	}
}
