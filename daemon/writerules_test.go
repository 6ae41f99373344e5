//go:build linux

package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/sandbox"
)

// TestWriteRulesPooled: a session claimed from a warm pool is decided by
// its template's write rules: a denied write is refused
// naming the rule; a path no rule matches is written (the control).
func TestWriteRulesPooled(t *testing.T) {
	tpls, err := LoadTemplates(writeTemplates(t, map[string]string{"w.toml": "[[rules]]\nname = \"no-deploy\"\nmatch = { write = \"deploy/**\" }\ndecision = \"deny\"\n"}))
	if err != nil {
		t.Fatal(err)
	}
	tpls["w"].Pool = 1
	m := newManager(t, Config{Templates: tpls, Engine: newFake, Tick: 10 * time.Millisecond})
	waitPool(t, m, "w", 1)
	ctx := context.Background()
	for _, name := range []string{"claimed", "next"} {
		s, err := m.Create(ctx, TokenTenant("a"), &CreateRequest{Template: "w"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Mkdir(ctx, "deploy"); !errors.Is(err, sandbox.ErrDenied) || !strings.Contains(err.Error(), "no-deploy") {
			t.Errorf("%s: mkdir deploy: %v", name, err)
		}
		if err := s.WriteFile(ctx, "app.txt", []byte("x"), 0o644); err != nil {
			t.Errorf("%s: control: %v", name, err)
		}
	}
}
