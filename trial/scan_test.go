package trial

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// report is a well-formed report line of exactly n bytes (n >= 16), padded with JSON whitespace.
func report(iter, n int) string {
	body := `"iter":` + strconv.Itoa(iter) + "}"
	return ReportPrefix + "{" + strings.Repeat(" ", n-len(ReportPrefix)-1-len(body)) + body
}

// scan runs ScanReports and returns its echo and what it called, in order: "iter N" for a report,
// "bad: ERR" for a rejected one.
func scan(in []byte) (echo []byte, events []string) {
	var out bytes.Buffer
	ScanReports(bytes.NewReader(in), &out, func(r Report) {
		events = append(events, "iter "+strconv.Itoa(r.Iter))
	}, func(err error) { events = append(events, "bad: "+err.Error()) })
	return out.Bytes(), events
}

// oracle is what ScanReports should call for in, worked out naively, the whole input in memory.
func oracle(in []byte) []string {
	var events []string
	lines := bytes.Split(in, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // after the last line ending
	}
	for _, l := range lines {
		l = bytes.TrimSuffix(l, []byte("\r"))
		if !bytes.HasPrefix(l, []byte(ReportPrefix)) {
			continue
		}
		if len(l) > MaxReportLine {
			events = append(events, fmt.Sprintf("bad: %v: %d bytes, more than MaxReportLine (%d)", ErrReportTooLong, len(l), MaxReportLine))
			continue
		}
		r, err := ParseReport(string(l))
		if err != nil {
			events = append(events, "bad: "+err.Error())
			continue
		}
		events = append(events, "iter "+strconv.Itoa(r.Iter))
	}
	return events
}

// withEnding is in with a line ending added when its last line has none.
func withEnding(in []byte) []byte {
	if len(in) == 0 || in[len(in)-1] == '\n' {
		return in
	}
	return append(bytes.Clone(in), '\n')
}

func TestScanReports(t *testing.T) {
	long := strings.Repeat("x", 3*MaxReportLine+17)
	tooLong := func(n int) string {
		return fmt.Sprintf("bad: report line too long: %d bytes, more than MaxReportLine (%d)", n, MaxReportLine)
	}
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"plain and reports", "epoch 1\n@rb {\"iter\": 1}\nepoch 2\n@rb {\"iter\": 2, \"acc\": 0.5}\n", []string{"iter 1", "iter 2"}},
		{"CRLF", "epoch 1\r\n@rb {\"iter\": 1}\r\n@rb {\"iter\": 2}\r\n", []string{"iter 1", "iter 2"}},
		{"no final newline", "epoch\n@rb {\"iter\": 3}", []string{"iter 3"}},
		{"no final newline after CR", "@rb {\"iter\": 3}\r", []string{"iter 3"}},
		{"malformed", "@rb {\"val\": 1}\n@rb {\"iter\": 2}\n", []string{`bad: report "{\"val\": 1}": no integer "iter"`, "iter 2"}},
		{"prefix inside a line", "say @rb {\"iter\": 1}\n", nil},
		{"long plain line, then a report", long + "\n@rb {\"iter\": 4}\n", []string{"iter 4"}},
		{"long plain line without ending", "@rb {\"iter\": 4}\n" + long, []string{"iter 4"}},
		{"report at the limit", report(5, MaxReportLine) + "\n", []string{"iter 5"}},
		{"report at the limit, CRLF", report(5, MaxReportLine) + "\r\n", []string{"iter 5"}},
		{"report at the limit, no ending", report(5, MaxReportLine), []string{"iter 5"}},
		{"report over the limit", report(6, MaxReportLine+1) + "\n@rb {\"iter\": 7}\n", []string{tooLong(MaxReportLine + 1), "iter 7"}},
		// the buffer fills with the CR: the CRLF is split between two reads
		{"report over the limit, CRLF", report(6, MaxReportLine+1) + "\r\n@rb {\"iter\": 7}\r\n", []string{tooLong(MaxReportLine + 1), "iter 7"}},
		{"report over the limit by the buffer", report(6, MaxReportLine+2) + "\n", []string{tooLong(MaxReportLine + 2)}},
		{"report over the limit, no ending", report(6, MaxReportLine+2), []string{tooLong(MaxReportLine + 2)}},
		{"long report", report(6, 5*MaxReportLine+3) + "\n", []string{tooLong(5*MaxReportLine + 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			echo, got := scan([]byte(tc.in))
			if !bytes.Equal(echo, withEnding([]byte(tc.in))) {
				t.Errorf("echo of %d bytes differs from the input of %d", len(echo), len(tc.in))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
			if o := oracle([]byte(tc.in)); strings.Join(got, "\n") != strings.Join(o, "\n") {
				t.Errorf("oracle disagrees: %q", o)
			}
		})
	}
}

func TestScanReportsNilEcho(t *testing.T) {
	var iters []int
	ScanReports(strings.NewReader(strings.Repeat("y", 2<<20)+"\n@rb {\"iter\": 1}\n"), nil,
		func(r Report) { iters = append(iters, r.Iter) }, func(err error) { t.Error(err) })
	if len(iters) != 1 || iters[0] != 1 {
		t.Fatalf("reports %v", iters)
	}
}

func TestScanReportsAfterHugeLine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	huge := make([]byte, 5<<20)
	for i := range huge {
		huge[i] = byte(rng.IntN(255)) + 1 // any byte but 0, newlines included
	}
	huge = bytes.ReplaceAll(huge, []byte("\n"), []byte("n"))
	in := append(append([]byte(nil), huge...), "\n@rb {\"iter\": 1, \"acc\": 0.25}\nlog\n@rb {\"iter\": 2}"...)
	var reps []Report
	var out bytes.Buffer
	ScanReports(bytes.NewReader(in), &out, func(r Report) { reps = append(reps, r) }, func(err error) { t.Error(err) })
	if len(reps) != 2 || reps[0].Iter != 1 || reps[0].Metrics["acc"] != 0.25 || reps[1].Iter != 2 || reps[0].At.IsZero() {
		t.Fatalf("reports %+v", reps)
	}
	if !bytes.Equal(out.Bytes(), withEnding(in)) {
		t.Fatal("the echo differs from the input")
	}
}

// endless is n bytes of one line, without ever holding it.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	if e.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), e.n)
	for i := range k {
		p[i] = 'z'
	}
	e.n -= k
	return k, nil
}

func TestScanReportsBoundedMemory(t *testing.T) {
	const size = 64 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var echoed int
	w := writerFunc(func(p []byte) (int, error) { echoed += len(p); return len(p), nil })
	ScanReports(io.MultiReader(&endless{size}, strings.NewReader("\n@rb {\"iter\": 1}\n")), w,
		func(Report) {}, func(err error) { t.Error(err) })
	runtime.ReadMemStats(&after)
	if echoed != size+len("\n@rb {\"iter\": 1}\n") {
		t.Fatalf("echoed %d bytes", echoed)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*MaxReportLine {
		t.Fatalf("allocated %d bytes for a %d byte line", alloc, size)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestRelayReports(t *testing.T) {
	at := time.Unix(1700000000, 250000000)
	stamp := `"at":1700000000.250000,`
	long := strings.Repeat("q", 2*MaxReportLine+5)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "epoch 1\nepoch 2\n", "epoch 1\nepoch 2\n"},
		{"report", "epoch\n@rb {\"iter\": 1}\n", "epoch\n@rb {" + stamp + "\"iter\": 1}\n"},
		{"CRLF", "@rb {\"iter\": 1}\r\nlog\r\n", "@rb {" + stamp + "\"iter\": 1}\r\nlog\r\n"},
		{"no final newline", "@rb {\"iter\": 1}", "@rb {" + stamp + "\"iter\": 1}\n"},
		{"already stamped", "@rb {\"at\": 5, \"iter\": 1}\n", "@rb {\"at\": 5, \"iter\": 1}\n"},
		{"long plain line", long + "\n@rb {\"iter\": 2}\n" + long, long + "\n@rb {" + stamp + "\"iter\": 2}\n" + long + "\n"},
		{"stamp would pass the limit", report(3, MaxReportLine-5) + "\n", report(3, MaxReportLine-5) + "\n"},
		{"over the limit", report(3, MaxReportLine+1) + "\n", report(3, MaxReportLine+1) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := RelayReports(strings.NewReader(tc.in), &out, func() time.Time { return at }, nil); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Fatalf("relayed %d bytes %.200q\nwant %d bytes %.200q", out.Len(), out.String(), len(tc.want), tc.want)
			}
		})
	}
	// What the driver reads from the relay carries the time the line was printed.
	var out bytes.Buffer
	RelayReports(strings.NewReader("@rb {\"iter\": 1}\n"), &out, func() time.Time { return at }, nil)
	ScanReports(&out, nil, func(r Report) {
		if r.Iter != 1 || !r.At.Equal(at) {
			t.Errorf("report %+v", r)
		}
	}, func(err error) { t.Error(err) })
}

func TestRelayReportsErrors(t *testing.T) {
	// A failing writer: the trainer's output is still read to its end.
	in := strings.NewReader(strings.Repeat("line\n", 1000) + strings.Repeat("x", 3*MaxReportLine))
	broken := errors.New("broken pipe")
	err := RelayReports(in, writerFunc(func([]byte) (int, error) { return 0, broken }), time.Now, nil)
	if !errors.Is(err, broken) || in.Len() != 0 {
		t.Fatalf("err %v, %d bytes left unread", err, in.Len())
	}
	// A failing reader: what came before is relayed, with a line ending.
	var out bytes.Buffer
	lost := errors.New("lost")
	err = RelayReports(io.MultiReader(strings.NewReader("a\nb"), &failing{lost}), &out, time.Now, nil)
	if !errors.Is(err, lost) || out.String() != "a\nb\n" {
		t.Fatalf("err %v, relayed %q", err, out.String())
	}
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

// mix is a trainer's output made at random from seed: plain lines, reports (well-formed,
// malformed, at and over the limit), long lines of random bytes, raw (the fuzzer's own bytes),
// with LF or CRLF endings, the last line perhaps without one.
func mix(seed uint64, raw []byte) []byte {
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	var b []byte
	iter := 0
	for range rng.IntN(12) {
		switch rng.IntN(8) {
		case 0:
			b = append(b, "epoch "+strconv.Itoa(iter)...)
		case 1, 2:
			iter++
			b = append(b, FormatReport(iter, map[string]float64{"acc": rng.Float64()})...)
		case 3:
			b = append(b, `@rb {"iter": "x"}`...)
		case 4:
			iter++
			b = append(b, report(iter, MaxReportLine-1+rng.IntN(4))...)
		case 5: // random bytes without newlines, around the buffer's size
			n := rng.IntN(3*MaxReportLine + 8)
			start := len(b)
			for range n {
				c := byte(rng.IntN(256))
				if c == '\n' {
					c = '\r'
				}
				b = append(b, c)
			}
			if rng.IntN(3) == 0 && n >= len(ReportPrefix) {
				copy(b[start:], ReportPrefix)
			}
		case 6:
			b = append(b, raw...)
		case 7: // nothing: an empty line
		}
		if rng.IntN(3) == 0 {
			b = append(b, '\r')
		}
		b = append(b, '\n')
	}
	if len(b) > 0 && rng.IntN(2) == 0 {
		b = b[:len(b)-1]
	}
	return b
}

func FuzzScanReports(f *testing.F) {
	f.Add(uint64(1), []byte("log"))
	f.Add(uint64(7), []byte(`@rb {"iter": 9}`))
	f.Add(uint64(42), []byte("\r\n\r"))
	f.Add(uint64(1234), []byte("@rb {\"iter\": 1}\r\n@rb"))
	f.Fuzz(func(t *testing.T, seed uint64, raw []byte) {
		in := mix(seed, raw)
		echo, got := scan(in)
		if !bytes.Equal(echo, withEnding(in)) {
			t.Fatalf("echo of %d bytes differs from the input of %d", len(echo), len(in))
		}
		if want := oracle(in); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("got\n%.2000q\nwant\n%.2000q", got, want)
		}
		// Through the wrapper's relay, the driver reads the same reports and rejects as many lines.
		var relayed bytes.Buffer
		if err := RelayReports(bytes.NewReader(in), &relayed, time.Now, nil); err != nil {
			t.Fatal(err)
		}
		_, again := scan(relayed.Bytes())
		if kinds(again) != kinds(got) {
			t.Fatalf("after the relay\n%.2000q\nbefore\n%.2000q", again, got)
		}
	})
}

// kinds is events with the reasons of rejects left out (a stamp changes the quoted line).
func kinds(events []string) string {
	var b strings.Builder
	for _, e := range events {
		if strings.HasPrefix(e, "bad: ") {
			e = "bad"
		}
		b.WriteString(e + "\n")
	}
	return b.String()
}

// The relay hands every well-formed report it passes on to emit, stamped, and nothing else.
func TestRelayReportsEmits(t *testing.T) {
	at := time.Unix(1700000000, 0)
	var got []Report
	in := "log\n@rb {\"iter\": 1, \"acc\": 0.5}\n@rb broken\n" + strings.Repeat("x", 3*MaxReportLine) + "\n@rb {\"iter\": 2, \"acc\": 0.6}"
	if err := RelayReports(strings.NewReader(in), io.Discard, func() time.Time { return at }, func(r Report) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Iter != 1 || got[1].Iter != 2 || got[1].Metrics["acc"] != 0.6 || !got[1].At.Equal(at) {
		t.Fatalf("emitted %+v", got)
	}
}

// A reused worker's end lines end its runs: each is echoed, then passed to end with its code,
// between the reports of the runs it separates; a malformed end line is the trainer's own output.
func TestScanRunsEndLines(t *testing.T) {
	in := "@rb {\"iter\": 1}\n@rb-end 0\nlog\n@rb-end zero\n@rb {\"iter\": 2}\n@rb-end 3\r\n"
	var out bytes.Buffer
	var events []string
	ScanRuns(strings.NewReader(in), &out, func(r Report) { events = append(events, fmt.Sprintf("report %d", r.Iter)) },
		func(err error) { events = append(events, "bad: "+err.Error()) }, func(code int) { events = append(events, fmt.Sprintf("end %d", code)) })
	if got, want := strings.Join(events, ", "), "report 1, end 0, report 2, end 3"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if out.String() != in {
		t.Fatalf("echo %q, want the input", out.String())
	}
	if _, ok := ParseEnd("@rb {\"iter\": 1}"); ok {
		t.Fatal("a report read as an end line")
	}
}

// An assignment is one JSON line that gives back every variable, values with '=' and newlines
// included.
func TestAssignmentRoundTrip(t *testing.T) {
	vars, err := Env{TrialID: "b0-t0001", Params: map[string]any{"note": "a=b\nc"}, TargetIter: 3, GPUs: []int{1, 2}}.Vars()
	if err != nil {
		t.Fatal(err)
	}
	line, err := Assignment(vars)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
		t.Fatalf("not one line: %q", line)
	}
	var got map[string]string
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, err := Assignment([]string{"NOEQUALS"}); err == nil {
		t.Fatal("a variable without '=' was accepted")
	}
}
