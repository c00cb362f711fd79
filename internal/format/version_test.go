package format

import (
	"runtime/debug"
	"testing"
)

// --version says what the build info knows when no version was stamped: the module's version
// (go install pkg@v1.2.3, or go build's pseudo-version), else the VCS revision; it said "dev".
func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "00ae8d8f1c2b3a4d5e6f"}, {Key: "vcs.time", Value: "2026-11-24T18:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"v1.0.0-3-gabc", &debug.BuildInfo{Main: debug.Module{Version: "v0.9.0"}}, "v1.0.0-3-gabc"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124180000-00ae8d8f1c2b+dirty"}, Settings: rev}, "v0.0.0-20261124180000-00ae8d8f1c2b+dirty"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, "devel 00ae8d8f1c2b-dirty 2026-11-24T18:00:00Z"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"", nil, "dev"},
	} {
		if got := Version(tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%q %+v: %q, want %q", tc.stamped, tc.bi, got, tc.want)
		}
	}
}
