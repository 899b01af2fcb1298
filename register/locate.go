package register

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// Locate finds the function each guard sits in, reading the source under
// root: "(*Policy).front" for a method, "Decide" for a function, "type
// GetStockArgs" for a struct tag, "migration 001_audit_log.sql" for SQL.
// It fails if a guard is not found exactly once in its file.
func Locate(root string, guards []Guard) (map[string]string, error) {
	out := map[string]string{}
	for _, g := range guards {
		src, err := os.ReadFile(filepath.Join(root, g.File))
		if err != nil {
			return nil, fmt.Errorf("guard %q: %w", g.Name, err)
		}
		if n := strings.Count(string(src), g.Guard); n != 1 {
			return nil, fmt.Errorf("guard %q is found %d times in %s, not once; update register/guards.json", g.Name, n, g.File)
		}
		if !strings.HasSuffix(g.File, ".go") {
			out[g.Name] = "migration " + filepath.Base(g.File)
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, g.File, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("guard %q: %w", g.Name, err)
		}
		at := token.Pos(f.FileStart + token.Pos(strings.Index(string(src), g.Guard)))
		out[g.Name] = enclosing(f, at)
		if out[g.Name] == "" {
			return nil, fmt.Errorf("guard %q in %s is in no function or type", g.Name, g.File)
		}
	}
	return out, nil
}

func enclosing(f *ast.File, at token.Pos) string {
	for _, d := range f.Decls {
		if at < d.Pos() || at >= d.End() {
			continue
		}
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				return d.Name.Name
			}
			return "(" + recv(d.Recv.List[0].Type) + ")." + d.Name.Name
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if at < s.Pos() || at >= s.End() {
					continue
				}
				switch s := s.(type) {
				case *ast.TypeSpec:
					return "type " + s.Name.Name
				case *ast.ValueSpec:
					return "var " + s.Names[0].Name
				}
			}
		}
	}
	return ""
}

func recv(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + recv(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return recv(e.X)
	}
	return "?"
}
