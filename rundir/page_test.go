package rundir

import "testing"

func TestParsePage(t *testing.T) {
	for _, c := range []struct {
		offset, limit string
		wantO, wantL  int
		wantErr       bool
	}{
		{"", "", 0, 10, false},
		{"20", "5", 20, 5, false},
		{"0", "50", 0, 50, false},
		{"-1", "", 0, 0, true},
		{"x", "", 0, 0, true},
		{"", "0", 0, 0, true},
		{"", "51", 0, 0, true},
		{"", "1.5", 0, 0, true},
	} {
		o, l, err := ParsePage(c.offset, c.limit, 10, 50)
		if (err != nil) != c.wantErr || o != c.wantO || l != c.wantL {
			t.Errorf("ParsePage(%q, %q): %d, %d, %v; want %d, %d, error %v", c.offset, c.limit, o, l, err, c.wantO, c.wantL, c.wantErr)
		}
	}
	for _, c := range []struct{ total, offset, limit, from, to int }{
		{27, 0, 10, 0, 10}, {27, 20, 10, 20, 27}, {27, 30, 10, 27, 27}, {0, 0, 10, 0, 0},
	} {
		if from, to := PageBounds(c.total, c.offset, c.limit); from != c.from || to != c.to {
			t.Errorf("PageBounds(%d, %d, %d) = %d, %d; want %d, %d", c.total, c.offset, c.limit, from, to, c.from, c.to)
		}
	}
}
