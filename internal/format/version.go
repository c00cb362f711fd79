package format

import "runtime/debug"

// Version is the version a binary says: stamped when set; else the module's version (go install pkg@v1.2.3, or the
// pseudo-version go build gives a checkout: v0.0.0-DATE-REVISION+dirty); else the VCS revision
// the build recorded (devel REVISION[-dirty] TIME); else "dev".
func Version(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	rev := vcs["vcs.revision"]
	if rev == "" {
		return "dev"
	}
	v := "devel " + rev[:min(len(rev), 12)]
	if vcs["vcs.modified"] == "true" {
		v += "-dirty"
	}
	if t := vcs["vcs.time"]; t != "" {
		v += " " + t
	}
	return v
}
