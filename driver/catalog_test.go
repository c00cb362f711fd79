package driver

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// --market is on-demand, spot or all (both); anything else is the user's to fix.
func TestMarketOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]cloud.Market{"all": "", "on-demand": cloud.OnDemand, "spot": cloud.Spot} {
		if got, err := MarketOf(in); err != nil || got != want {
			t.Errorf("%q: %q, %v, want %q", in, got, err, want)
		}
	}
	if _, err := MarketOf("reserved"); !errors.Is(err, ErrInput) {
		t.Errorf("reserved: %v, want ErrInput", err)
	}
}

// What catalog refresh wrote is said in a line, then one per type left out.
func TestRefreshedWriteText(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	(&Refreshed{Path: "c.json", Region: "us-east-1", Types: 2, Skipped: []string{"p9.huge: no price"}}).WriteText(&out)
	if want := "wrote c.json: 2 instance types with GPUs in us-east-1\nleft out p9.huge: no price\n"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
}
