//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// TestGitLinkWorkspaceRefused: a workspace written in place whose .git is
// a link to a repository outside it is refused before anything runs
// (ErrRefused, naming the link): git on the host follows the link, and a
// hooks path its config names in the workspace would not be protected, so
// the command could plant what git then runs (tried: it wrote
// tools/hooks/pre-commit). The control: the same repository named by a
// .git file runs, and the hooks path is read-only inside.
func TestGitLinkWorkspaceRefused(t *testing.T) {
	outside := t.TempDir()
	repo := filepath.Join(outside, "repo.git")
	for _, d := range []string{"objects", "refs/heads", "hooks"} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"HEAD":   "ref: refs/heads/main\n",
		"config": "[core]\n\trepositoryformatversion = 0\n\thooksPath = tools/hooks\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, link := range []bool{true, false} {
		name := "git file"
		if link {
			name = "link"
		}
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.MkdirAll(filepath.Join(ws, "tools/hooks"), 0o755); err != nil {
				t.Fatal(err)
			}
			if link {
				if err := os.Symlink(repo, filepath.Join(ws, ".git")); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+repo+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p := workspacePolicy(t, ws)
			var out, errb bytes.Buffer
			rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p,
				Args: []string{"/bin/sh", "-c", "echo x > tools/hooks/pre-commit && echo wrote"}},
				backend.Stdio{Stdout: &out, Stderr: &errb})
			if link {
				if !errors.Is(err, sandbox.ErrRefused) {
					t.Fatalf("err = %v, want ErrRefused", err)
				}
				if _, ok := errors.AsType[*workspace.GitLinkError](err); !ok || !strings.Contains(err.Error(), filepath.Join(ws, ".git")) {
					t.Fatalf("err = %v, want a GitLinkError naming %s/.git", err, ws)
				}
				if _, err := os.Stat(filepath.Join(ws, "tools/hooks/pre-commit")); err == nil {
					t.Fatal("the refused run wrote the hook")
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v (stderr %s)", err, errb.String())
			}
			if !strings.Contains(errb.String(), "Read-only file system") || strings.Contains(out.String(), "wrote") {
				t.Fatalf("the hooks path a .git file's config names was writable: exit %d, stdout %q, stderr %q", rep.ExitCode, out.String(), errb.String())
			}
		})
	}
}
