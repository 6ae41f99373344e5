// Package conventions holds tests that keep the repository's conventions:
// one package doc per package, and dependencies that point one way
// (DESIGN.md: cmd -> sandbox -> policy, backend/* -> internal/*, egress,
// workspace, audit; nothing below sandbox reads the policy; libraries
// only tests need are linked into no program).
package conventions

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/moatbox/moat"

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root not found from %s", dir)
	}
	return dir
}

// TestOnePackageDoc: every package has exactly one doc comment, so `go
// doc` shows what it owns and refuses, and two files never disagree.
func TestOnePackageDoc(t *testing.T) {
	root := repoRoot(t)
	docs := map[string][]string{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		if src, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(src), "//go:build ignore") {
			return nil // a generator, not part of the package
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		dir := filepath.Dir(p)
		if _, ok := docs[dir]; !ok {
			docs[dir] = nil
		}
		if f.Doc != nil {
			docs[dir] = append(docs[dir], filepath.Base(p))
		}
		return nil
	})
	for dir, files := range docs {
		rel, _ := filepath.Rel(root, dir)
		if len(files) != 1 {
			t.Errorf("%s: %d files carry a package doc (%v), want exactly one", rel, len(files), files)
		}
	}
}

// TestDependenciesPointOneWay: the layers below sandbox never import the
// policy package, and policy imports nothing that reaches the kernel.
func TestDependenciesPointOneWay(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Deps " "}}`, module+"/...").Output()
	if err != nil {
		t.Skipf("go list cannot load the module as uid %d (%v); the run as root checks this", os.Getuid(), err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ":")
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		depList := strings.Fields(deps)
		has := func(dep string) bool {
			for _, d := range depList {
				if d == dep {
					return true
				}
			}
			return false
		}
		below := strings.HasPrefix(rel, "backend") || strings.HasPrefix(rel, "internal/") ||
			rel == "egress" || rel == "workspace" || rel == "audit"
		if below && has(module+"/policy") {
			t.Errorf("%s imports policy: nothing below sandbox may read the policy", rel)
		}
		if rel == "policy" {
			for _, bad := range []string{"golang.org/x/sys/unix", "os/exec", "net", module + "/backend"} {
				if has(bad) {
					t.Errorf("policy depends on %s: it must stay free of the kernel", bad)
				}
			}
		}
		if rel == "harness" {
			for _, bad := range []string{module + "/sandbox", module + "/backend", "golang.org/x/sys/unix", "os/exec"} {
				if has(bad) {
					t.Errorf("harness depends on %s: it decides, and reaches neither the sandbox nor the kernel", bad)
				}
			}
		}
		// The client and the terminal filter it shares with the backends
		// link the standard library alone.
		if rel == "client" || rel == "internal/termsafe" {
			for _, d := range depList {
				first, _, _ := strings.Cut(d, "/")
				if rel == "client" && d == module+"/internal/termsafe" {
					continue
				}
				if strings.Contains(first, ".") && !strings.HasPrefix(d, "vendor/") {
					t.Errorf("%s depends on %s: a program embedding the client must link nothing of the sandbox", rel, d)
				}
			}
		}
		if rel == "audit" {
			for _, d := range depList {
				// A module path starts with a domain; the standard library's
				// own (crypto/internal/entropy/v1.0.0) may have a dot later.
				// termsafe is held to the standard library above.
				first, _, _ := strings.Cut(d, "/")
				if d == module+"/internal/termsafe" {
					continue
				}
				if strings.Contains(first, ".") && !strings.HasPrefix(d, "vendor/") {
					t.Errorf("audit depends on %s: it uses the standard library only", d)
				}
			}
		}
	}
}

// TestCommandsImportNoInternal: the programs under cmd/ (their tests
// included) reach moat through its public packages only, so that a rule
// that protects the user cannot live in the CLI where an API caller would
// skip it (DESIGN.md, "Layers").
func TestCommandsImportNoInternal(t *testing.T) {
	root := repoRoot(t)
	var files int
	filepath.WalkDir(filepath.Join(root, "cmd"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		files++
		for _, imp := range internalImports(t, p, nil) {
			t.Errorf("%s imports %s: cmd/ goes through the public packages (sandbox, policy, workspace, audit, ...)", p, imp)
		}
		return nil
	})
	if files == 0 {
		t.Fatal("no Go files under cmd/: the test checks nothing")
	}
	// Positive control: the same check finds an internal import.
	src := []byte("package main\nimport \"" + module + "/internal/seccomp\"\n")
	if got := internalImports(t, "control.go", src); len(got) != 1 {
		t.Errorf("the check misses an internal import: %v", got)
	}
}

// internalImports lists the module's internal packages a file imports.
func internalImports(t *testing.T, path string, src []byte) []string {
	t.Helper()
	var s any
	if src != nil {
		s = src
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, s, parser.ImportsOnly)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return nil
	}
	var out []string
	for _, imp := range f.Imports {
		p := strings.Trim(imp.Path.Value, `"`)
		if strings.HasPrefix(p, module+"/internal/") {
			out = append(out, p)
		}
	}
	return out
}

// TestHelpersNamedMoatDash: every process moat starts from its own binary
// as a helper (a sandbox's init, the id-mapping holder, gVisor's forwarder
// and gate) gets an argv[0] that begins "moat-", which is how the entry
// point (internal/rt0/entry) tells a helper from a command line and
// leaves the helper's memory faulted in lazily. The names are the string
// constants whose names end in Arg0.
func TestHelpersNamedMoatDash(t *testing.T) {
	root := repoRoot(t)
	found := map[string]string{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "/testdata/") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasSuffix(name.Name, "Arg0") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						found[name.Name] = strings.Trim(lit.Value, `"`)
					}
				}
			}
		}
		return nil
	})
	// Control: the helpers known when this test was written are found.
	for _, name := range []string{"initArg0", "usernsArg0", "forwardArg0", "gateArg0"} {
		if _, ok := found[name]; !ok {
			t.Errorf("constant %s not found: the test no longer sees the helpers' names", name)
		}
	}
	for name, v := range found {
		if !strings.HasPrefix(v, "moat-") {
			t.Errorf("helper name %s = %q does not begin with \"moat-\": the entry point would pre-fault it like a command line", name, v)
		}
	}
}
