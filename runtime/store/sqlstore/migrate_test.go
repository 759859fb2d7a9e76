package sqlstore

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestRebind(t *testing.T) {
	d := Dialect{Numbered: true}
	if got := d.rebind("a = ? AND b IN (?, ?)"); got != "a = $1 AND b IN ($2, $3)" {
		t.Fatal(got)
	}
	if got := (Dialect{}).rebind("a = ?"); got != "a = ?" {
		t.Fatal(got)
	}
}

func TestSplitStatements(t *testing.T) {
	got := splitStatements("-- comment\nCREATE TABLE a (x INT);\n\nALTER TABLE a\n  ADD COLUMN y INT;\nSELECT 1")
	if len(got) != 3 || got[0] != "CREATE TABLE a (x INT)" || !strings.HasPrefix(got[1], "ALTER TABLE a") || got[2] != "SELECT 1" {
		t.Fatalf("%q", got)
	}
}

func TestLoadMigrations(t *testing.T) {
	migs, err := LoadMigrations(fstest.MapFS{
		"0002_b.sql": {Data: []byte("B;")}, "0001_a.sql": {Data: []byte("A;")}, "README": {Data: []byte("x")},
	})
	if err != nil || len(migs) != 2 || migs[0].Version != 1 || migs[1].Name != "b" {
		t.Fatalf("%+v %v", migs, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"bad name":     {"first.sql": {Data: []byte("A;")}},
		"dup versions": {"0001_a.sql": {Data: []byte("A;")}, "01_b.sql": {Data: []byte("B;")}},
	} {
		if _, err := LoadMigrations(fsys); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
