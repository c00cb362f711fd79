package format

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestMoney(t *testing.T) {
	for _, tc := range []struct {
		usd  float64
		want string
	}{
		{0, "$0.0000"}, {0.0042, "$0.0042"}, {0.18084, "$0.1808"}, {0.99994, "$0.9999"}, {1, "$1.00"}, {12.244, "$12.24"},
		{1234.5, "$1234.50"}, {-0.5, "-$0.5000"}, {-3, "-$3.00"}, {math.Inf(1), "∞"}, {math.NaN(), "-"},
	} {
		if got := Money(tc.usd); got != tc.want {
			t.Errorf("Money(%v) = %q, want %q", tc.usd, got, tc.want)
		}
	}
}

func TestClock(t *testing.T) {
	for _, tc := range []struct {
		s    float64
		want string
	}{
		{0, "0.0s"}, {9.34, "9.3s"}, {59.94, "59.9s"}, {60, "1:00"}, {65.4, "1:05"}, {3599.4, "59:59"}, {3600, "1:00:00"},
		{3725, "1:02:05"}, {-90, "-1:30"}, {math.Inf(1), "∞"}, {math.NaN(), "-"},
	} {
		if got := Clock(tc.s); got != tc.want {
			t.Errorf("Clock(%v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n          int
		word, want string
	}{{0, "GPU", "0 GPUs"}, {1, "GPU", "1 GPU"}, {2, "node", "2 nodes"}, {1, "node", "1 node"}} {
		if got := Plural(tc.n, tc.word); got != tc.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", tc.n, tc.word, got, tc.want)
		}
	}
}

func TestPct(t *testing.T) {
	if got := Pct(110, 100); math.Abs(got-10) > 1e-9 {
		t.Errorf("Pct(110, 100) = %v", got)
	}
	if got := Pct(5, 0); got != 0 {
		t.Errorf("Pct(5, 0) = %v", got)
	}
}

func TestAgoAndShorten(t *testing.T) {
	now := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{5 * time.Second, "5s ago"}, {3 * time.Minute, "3m ago"}, {7 * time.Hour, "7h ago"}, {72 * time.Hour, now.Add(-72 * time.Hour).Local().Format("2006-01-02")}} {
		if got := Ago(now.Add(-tc.d), now); got != tc.want {
			t.Errorf("%v ago: %q, want %q", tc.d, got, tc.want)
		}
	}
	if Ago(time.Time{}, now) != "-" {
		t.Error("no time")
	}
	if got := Shorten("a long\nreason why", 8); got != "a long …" {
		t.Errorf("shorten: %q", got)
	}
	if got := Shorten("ünïcödé", 7); got != "ünïcödé" {
		t.Errorf("shorten at its length: %q", got)
	}
}

func TestTable(t *testing.T) {
	var b strings.Builder
	tw := NewTable(&b, "NAME", "COST")
	tw.Row("a", Money(1.5))
	tw.Row("longer", Money(0.25))
	tw.Flush()
	want := "    NAME     COST\n       a    $1.50\n  longer  $0.2500\n"
	if b.String() != want {
		t.Fatalf("%q\nwant %q", b.String(), want)
	}
}

// JSON is indented by two spaces, one document and a newline, HTML characters escaped as
// encoding/json does.
func TestJSON(t *testing.T) {
	var b strings.Builder
	if err := JSON(&b, map[string]any{"a": []int{1}, "b": "<x>"}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"a\": [\n    1\n  ],\n  \"b\": \"\\u003cx\\u003e\"\n}\n"; b.String() != want {
		t.Fatalf("JSON = %q, want %q", b.String(), want)
	}
	if err := JSON(&b, func() {}); err == nil {
		t.Fatal("a value JSON cannot hold was written")
	}
}
