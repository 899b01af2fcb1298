package httpserver_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestEveryServerIsBuiltHere: no process builds its own http.Server, so
// none can forget a timeout or bind every interface by accident.
func TestEveryServerIsBuiltHere(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	var found []string
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bench" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, filepath.Join("internal", "httpserver")) {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.CompositeLit); ok {
				if sel, ok := lit.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Server" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "http" {
						// The demo upstream is another system and builds its own,
						// which must still set every timeout.
						if strings.Contains(path, filepath.Join("upstream", "settings.go")) && setsTimeouts(lit) {
							return true
						}
						found = append(found, path)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("only %d files checked", checked)
	}
	for _, f := range found {
		t.Errorf("%s builds an http.Server itself; use httpserver.New", f)
	}
}

func setsTimeouts(lit *ast.CompositeLit) bool {
	set := map[string]bool{}
	for _, e := range lit.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok {
				set[k.Name] = true
			}
		}
	}
	return set["ReadHeaderTimeout"] && set["ReadTimeout"] && set["WriteTimeout"] && set["IdleTimeout"]
}
