package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The limits a newcomer can read the workflow within: no function longer
// than maxFuncLines, no type with more than maxMethods methods.
const (
	maxFuncLines = 60
	maxMethods   = 15
)

// TestTheWorkflowStaysReadable holds the package's own code (its tests
// aside) to those limits, so a phase stays its own short type.
func TestTheWorkflowStaysReadable(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fs := token.NewFileSet()
	methods := map[string][]string{}
	read := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		read++
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if n := fs.Position(fn.End()).Line - fs.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines, over %d: split it into steps of its own", name, fn.Name.Name, n, maxFuncLines)
			}
			if fn.Recv != nil {
				recv := receiverType(fn.Recv.List[0].Type)
				methods[recv] = append(methods[recv], fn.Name.Name)
			}
		}
	}
	if read < 10 {
		t.Fatalf("read %d files of the package; run the test from its folder", read)
	}
	for recv, ms := range methods {
		if len(ms) > maxMethods {
			t.Errorf("%s has %d methods, over %d (%s): give a phase's state a type of its own", recv, len(ms), maxMethods, strings.Join(ms, ", "))
		}
	}
}

// receiverType names a method's receiver type, pointer or not.
func receiverType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
