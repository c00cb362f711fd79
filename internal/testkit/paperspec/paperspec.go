package paperspec

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// HedgedTable2 writes, into dir, the paper's Table 2 job (examples/paper/table2-spot.yaml under
// root, the repository's top) on spot and on-demand nodes, spot interrupted 5 times a node-hour,
// planned at deadline quantile q (cluster.hedge: the planner may split a stage's nodes between
// the markets), with the spot notice given ("": the example's, EC2's 2 minutes), and returns its
// path. It fails when the example no longer says what it changes.
func HedgedTable2(root, dir string, q float64, notice string) (string, error) {
	src, err := os.ReadFile(filepath.Join(root, "examples/paper/table2-spot.yaml"))
	if err != nil {
		return "", err
	}
	profiles, err := filepath.Abs(filepath.Join(root, "examples/paper/profiles"))
	if err != nil {
		return "", err
	}
	text := string(src)
	for _, r := range [][2]string{
		{"\n  market: spot\n", "\n  markets: [on-demand, spot]\n"},
		{"interruptions_per_hour: 0.1", "interruptions_per_hour: 5"},
		{"file: profiles/", "file: " + profiles + "/"},
		{"deadline_quantile: 0.5", fmt.Sprint("deadline_quantile: ", q)},
		{"notice: 2m", "notice: " + cmp.Or(notice, "2m")},
	} {
		if !strings.Contains(text, r[0]) {
			return "", fmt.Errorf("the example no longer says %q", r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	path := filepath.Join(dir, "table2-hedged.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", err
	}
	return path, nil
}
