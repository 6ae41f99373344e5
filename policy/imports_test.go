package policy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// allowedImports is everything package policy may import: pure standard
// library packages, go-toml and the destination grammar (internal/netrule,
// itself pure; the conventions test checks what it reaches). The policy model makes no system calls, so
// anything reaching the kernel (syscall, x/sys, os/exec, net beyond netip)
// is refused here; the files a policy names are read through
// internal/inputfile, which checks they are regular files of bounded size,
// and os is used for nothing but os.ReadFile.
var allowedImports = map[string]bool{
	"bytes": true, "crypto/sha256": true, "encoding/hex": true, "encoding/json": true, "errors": true, "fmt": true, "io/fs": true, "math": true, "math/big": true,
	"net/netip": true, "os": true, "path": true, "path/filepath": true, "reflect": true, "regexp": true, "regexp/syntax": true,
	"maps": true, "slices": true, "sort": true, "strconv": true, "strings": true, "time": true,
	"github.com/pelletier/go-toml/v2":            true,
	"github.com/pelletier/go-toml/v2/unstable":   true,
	"github.com/moatbox/moat/internal/netrule":   true,
	"github.com/moatbox/moat/internal/inputfile": true,
	"github.com/moatbox/moat/internal/suggest":   true,
}

func TestImports(t *testing.T) {
	files := nonTestFiles(t)
	docs := 0
	for name, f := range files {
		if f.Doc != nil {
			docs++
			if filepath.Base(name) != "doc.go" {
				t.Errorf("%s: package doc belongs in doc.go", name)
			}
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowedImports[path] {
				t.Errorf("%s imports %q; package policy must stay free of system calls", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && sel.Sel.Name != "ReadFile" {
				t.Errorf("%s uses os.%s; only os.ReadFile is allowed", name, sel.Sel.Name)
			}
			return true
		})
	}
	if docs != 1 {
		t.Errorf("found %d package doc comments, want exactly 1", docs)
	}
}

func nonTestFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string]*ast.File)
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	return files
}
