package backendtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
)

// BenchmarkLifecycle measures be's sessions on the base Spec: Create
// (each iteration creates a sandbox and destroys it; the metrics are the
// median and 90th percentile of each step) and Exec (/bin/true to its
// exit status in one live sandbox).
func BenchmarkLifecycle(b *testing.B, be backend.Lifecycle) {
	ctx := context.Background()
	b.Run("Create", func(b *testing.B) {
		ws := Workspace(b)
		var create, destroy []time.Duration
		for range b.N {
			t0 := time.Now()
			in, err := be.Create(ctx, BaseSpec(ws), backend.Stdio{})
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			in.Destroy(ctx)
			create, destroy = append(create, t1.Sub(t0)), append(destroy, time.Since(t1))
		}
		report(b, "create", create)
		report(b, "destroy", destroy)
	})
	b.Run("Exec", func(b *testing.B) {
		ws := Workspace(b)
		spec := BaseSpec(ws)
		in, err := be.Create(ctx, spec, backend.Stdio{})
		if err != nil {
			b.Fatal(err)
		}
		defer in.Destroy(ctx)
		p := &backend.ProcessSpec{Args: []string{"/bin/true"}, Env: spec.Env, Dir: spec.Dir}
		var exec []time.Duration
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			proc, err := in.Exec(ctx, p, backend.Stdio{})
			if err != nil {
				b.Fatal(err)
			}
			if st, err := proc.Wait(); err != nil || st.ExitCode != 0 {
				b.Fatal(st, err)
			}
			exec = append(exec, time.Since(t0))
		}
		report(b, "exec", exec)
	})
}

// report adds the median and 90th percentile of ds, in ms, as metrics
// named NAME-p50-ms and NAME-p90-ms.
func report(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(ds[len(ds)/2]), name+"-p50-ms")
	b.ReportMetric(ms(ds[len(ds)*9/10]), name+"-p90-ms")
}
