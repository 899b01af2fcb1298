package docs_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is the module path every toolgate import starts with.
const module = "github.com/toolgate/toolgate/"

// TestTheMayImportTableIsTheCode: each package the README's architecture
// table gives a "may import" list imports, outside its tests, only what the
// list names (and its own subpackages); "nothing of toolgate" means none.
func TestTheMayImportTableIsTheCode(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				imports[pkg] = append(imports[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	rules := map[string][]string{} // package → what it may import; nil: nothing
	checked := 0
	for _, row := range strings.Split(string(raw), "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		folders := backticked.FindAllStringSubmatch(cells[1], -1)
		may := strings.TrimSpace(cells[3])
		overrides := regexp.MustCompile("\\(`([a-z/]+)/`: ([^)]*)\\)").FindAllStringSubmatch(may, -1)
		may = regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(may, "")
		main, sub, _ := strings.Cut(may, ";")
		for _, f := range folders {
			folder := strings.TrimSuffix(f[1], "/")
			if strings.Contains(folder, " ") || folder == "cmd" || folder == "internal" || folder == "bench" || folder == "examples" {
				continue
			}
			if rule, ok := parseMay(main); ok {
				rules[folder] = rule
			}
			if m := regexp.MustCompile("`([a-z]+)/` nothing of toolgate").FindStringSubmatch(sub); m != nil {
				rules[folder+"/"+m[1]] = nil
			}
		}
		for _, o := range overrides {
			if rule, ok := parseMay(o[2]); ok {
				rules[o[1]] = rule
			}
		}
	}
	for pkg, allowed := range rules {
		if _, ok := imports[pkg]; !ok {
			if _, err := os.Stat("../" + pkg); err != nil {
				t.Errorf("the README's table names %s/, which is not there", pkg)
			}
		}
		checked++
		for _, imp := range imports[pkg] {
			if strings.HasPrefix(imp, pkg+"/") || slices.Contains(allowed, imp) {
				continue
			}
			t.Errorf("%s imports %s, which the README's table does not let it (it may import %v)", pkg, imp, allowed)
		}
	}
	if checked < 10 {
		t.Fatalf("read only %d rules from the README's table", checked)
	}
}

// parseMay reads a "may import" cell: "nothing of toolgate", or the
// backticked packages it lists; false for any other.
func parseMay(cell string) ([]string, bool) {
	cell = strings.TrimSpace(cell)
	if cell == "nothing of toolgate" {
		return nil, true
	}
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, strings.TrimSuffix(m[1], "/"))
	}
	return out, len(out) > 0
}
