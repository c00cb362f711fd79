package testreport

import (
	"strings"
	"testing"
)

// A stream with a passing and a failing test, a package result of each kind and a build error:
// the failing test's output and the package lines are echoed, the passing test's output is not,
// the run failed, and the slowest are listed slowest first with their packages' times.
func TestRead(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"m/a","Test":"TestFast"}`,
		`{"Action":"output","Package":"m/a","Test":"TestFast","Output":"quiet\n"}`,
		`{"Action":"pass","Package":"m/a","Test":"TestFast","Elapsed":0.5}`,
		`{"Action":"output","Package":"m/a","Test":"TestSlow","Output":"    a_test.go:9: boom\n"}`,
		`{"Action":"fail","Package":"m/a","Test":"TestSlow","Elapsed":12.25}`,
		`{"Action":"pass","Package":"m/a","Test":"TestSlow/sub","Elapsed":12}`,
		`{"Action":"output","Package":"m/a","Output":"FAIL\tm/a\t13.0s\n"}`,
		`{"Action":"fail","Package":"m/a","Elapsed":13}`,
		`{"Action":"output","Package":"m/b","Output":"ok  \tm/b\t2.0s\n"}`,
		`{"Action":"pass","Package":"m/b","Elapsed":2}`,
		`# m/c`,
		`c.go:1: syntax error`,
	}, "\n")
	var out strings.Builder
	s, err := Read(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"a_test.go:9: boom", "ok  \tm/b\t2.0s", "c.go:1: syntax error", "FAIL\tm/a"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet") {
		t.Errorf("a passing test's output was echoed:\n%s", got)
	}
	if !s.Failed || len(s.Tests) != 3 || len(s.Packages) != 2 {
		t.Fatalf("summary %+v", s)
	}
	var table strings.Builder
	s.Slowest(&table, 15)
	slow, fast := strings.Index(table.String(), "m/a  TestSlow"), strings.Index(table.String(), "m/a  TestFast")
	if slow < 0 || fast < 0 || slow > fast || strings.Contains(table.String(), "TestSlow/sub") {
		t.Fatalf("slowest table, slowest first and top-level tests only:\n%s", table.String())
	}
}

// A clean stream has not failed.
func TestReadClean(t *testing.T) {
	s, err := Read(strings.NewReader(`{"Action":"pass","Package":"m/a","Elapsed":1}`), &strings.Builder{})
	if err != nil || s.Failed {
		t.Fatalf("%+v %v", s, err)
	}
}
