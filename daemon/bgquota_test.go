package daemon

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestBackgroundBoundUnderConcurrency: a session's background commands
// are bounded (Config.MaxBackground) however many start at once: the
// count and the place are taken together. Control: the bound's own
// number start, and another session has a bound of its own.
func TestBackgroundBoundUnderConcurrency(t *testing.T) {
	m := newManager(t, Config{MaxBackground: 3})
	ctx := context.Background()
	tenant := TokenTenant("a")
	for round := range 5 {
		s, err := m.Create(ctx, tenant, &CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok, quota := 0, 0
		start := make(chan struct{})
		for range 400 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := s.Start(&ExecRequest{Args: []string{"sleep"}}, false)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrQuota):
					quota++
				default:
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if ok != 3 || quota != 397 {
			t.Fatalf("round %d: %d started, %d refused; want 3 and 397", round, ok, quota)
		}
		if n := len(s.Processes()); n != 3 {
			t.Errorf("round %d: %d processes listed, want 3", round, n)
		}
		if err := m.Delete(ctx, tenant, s.ID); err != nil {
			t.Fatal(err)
		}
	}
}
