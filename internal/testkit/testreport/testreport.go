package testreport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// event is one test2json record.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// Timing is one test's or package's elapsed time and result.
type Timing struct {
	Package, Test string
	Seconds       float64
	Action        string // pass, fail, skip
}

// Summary is what a stream of events said.
type Summary struct {
	Tests, Packages []Timing
	Failed          bool
}

// Read copies the readable part of a `go test -json` stream from r to w as it comes — package
// results, every failing test's output, non-JSON lines — and returns the timings. A failing test
// or package, or a line that says FAIL (a build failure), makes Failed true.
func Read(r io.Reader, w io.Writer) (Summary, error) {
	var s Summary
	output := map[string]*bytes.Buffer{} // per package/test, until it passes or fails
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line)
			if bytes.HasPrefix(line, []byte("FAIL")) || bytes.Contains(line, []byte("[build failed]")) {
				s.Failed = true
			}
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if output[key] == nil {
				output[key] = &bytes.Buffer{}
			}
			output[key].WriteString(e.Output)
		case "pass", "fail", "skip":
			t := Timing{Package: e.Package, Test: e.Test, Seconds: e.Elapsed, Action: e.Action}
			if e.Test == "" {
				s.Packages = append(s.Packages, t)
				if e.Action == "fail" {
					s.Failed = true
					if b := output[key]; b != nil {
						w.Write(b.Bytes()) // a package that failed without a failing test: a panic, a timeout
					}
				} else if b := output[key]; b != nil {
					w.Write(lastLine(b.Bytes())) // "ok  pkg  12.3s"
				}
			} else {
				s.Tests = append(s.Tests, t)
				if e.Action == "fail" {
					s.Failed = true
					if b := output[key]; b != nil {
						w.Write(b.Bytes())
					}
				}
			}
			delete(output, key)
		}
	}
	return s, sc.Err()
}

func lastLine(b []byte) []byte {
	b = bytes.TrimRight(b, "\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return append(b, '\n')
}

// Slowest writes the n slowest top-level tests and the packages by time.
func (s Summary) Slowest(w io.Writer, n int) {
	top := slices.DeleteFunc(slices.Clone(s.Tests), func(t Timing) bool { return strings.Contains(t.Test, "/") })
	slices.SortStableFunc(top, func(a, b Timing) int { return cmpDesc(a.Seconds, b.Seconds) })
	total := 0.0
	for _, p := range s.Packages {
		total += p.Seconds
	}
	fmt.Fprintf(w, "\nslowest %d tests (of %d; %d packages, %.0f s in all):\n", min(n, len(top)), len(top), len(s.Packages), total)
	for _, t := range top[:min(n, len(top))] {
		fmt.Fprintf(w, "%8.1f s  %s  %s\n", t.Seconds, short(t.Package), t.Test)
	}
	pk := slices.Clone(s.Packages)
	slices.SortStableFunc(pk, func(a, b Timing) int { return cmpDesc(a.Seconds, b.Seconds) })
	fmt.Fprintf(w, "\nslowest packages:\n")
	for _, p := range pk[:min(n, len(pk))] {
		fmt.Fprintf(w, "%8.1f s  %s\n", p.Seconds, short(p.Package))
	}
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// short drops the module's path from a package's.
func short(pkg string) string {
	return strings.TrimPrefix(pkg, "github.com/rubberband-hpo/rubberband/")
}
