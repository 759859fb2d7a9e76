package genai

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// docs/contract.md is the wire contract in words; this package is it in code. The test
// keeps them one: every table cell that is exactly `genai.Name` must name a string
// constant of this package whose value is the first `quoted` token of the cell before
// it, and every constant that is part of the wire (a gen_ai.* or agentmeter.* key, a
// metric or a label) must be listed in some table.
func TestContractDocMatchesConstants(t *testing.T) {
	consts := packageStringConsts(t)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "contract.md"))
	if err != nil {
		t.Fatalf("read docs/contract.md: %v", err)
	}

	goCell := regexp.MustCompile("^`genai\\.([A-Za-z0-9_]+)`$")
	quoted := regexp.MustCompile("`([^`]+)`")
	listed := map[string]bool{}
	rows := 0
	for n, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		for i, c := range cells {
			m := goCell.FindStringSubmatch(c)
			if m == nil {
				continue
			}
			name := m[1]
			listed[name] = true
			rows++
			want, ok := consts[name]
			if !ok {
				t.Errorf("docs/contract.md:%d names genai.%s, which is not a string constant of package genai", n+1, name)
				continue
			}
			// the value is in the cell before; an empty cell continues the row above
			// (a second value of the same kind)
			if i == 0 {
				t.Errorf("docs/contract.md:%d: genai.%s has no value cell before it", n+1, name)
				continue
			}
			if cells[i-1] == "" {
				continue
			}
			got := quoted.FindStringSubmatch(cells[i-1])
			if got == nil {
				t.Errorf("docs/contract.md:%d: the cell before genai.%s quotes no value", n+1, name)
				continue
			}
			if got[1] != want {
				t.Errorf("docs/contract.md:%d says %q for genai.%s; the constant is %q", n+1, got[1], name, want)
			}
		}
	}
	if rows < 50 {
		t.Fatalf("found only %d genai.* cells in docs/contract.md; did the tables' shape change?", rows)
	}

	var missing []string
	for name, v := range consts {
		wire := strings.HasPrefix(v, "gen_ai.") || strings.HasPrefix(v, "agentmeter.") ||
			strings.HasPrefix(name, "Metric") || strings.HasPrefix(name, "Label")
		if wire && !listed[name] {
			missing = append(missing, "genai."+name+" = "+strconv.Quote(v))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s is part of the wire contract but docs/contract.md lists it in no table", m)
	}
}

// packageStringConsts reads the exported string constants of this package's source files.
func packageStringConsts(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]ast.Expr{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						decls[id.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	out := map[string]string{}
	for name, e := range decls {
		if !ast.IsExported(name) {
			continue
		}
		if v, ok := evalString(e, decls, 0); ok {
			out[name] = v
		}
	}
	return out
}

// evalString evaluates a constant string expression: literals, other constants and +.
func evalString(e ast.Expr, decls map[string]ast.Expr, depth int) (string, bool) {
	if depth > 16 {
		return "", false
	}
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.Ident:
		d, ok := decls[x.Name]
		if !ok {
			return "", false
		}
		return evalString(d, decls, depth+1)
	case *ast.ParenExpr:
		return evalString(x.X, decls, depth+1)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		a, ok1 := evalString(x.X, decls, depth+1)
		b, ok2 := evalString(x.Y, decls, depth+1)
		return a + b, ok1 && ok2
	}
	return "", false
}
