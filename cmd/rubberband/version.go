package main

import (
	"runtime/debug"

	"github.com/rubberband-hpo/rubberband/internal/format"
)

// buildVersion is stamped by `make build` (-ldflags "-X main.buildVersion=..."): the one value
// the linker sets, so it is a variable.
var buildVersion string

// version is the stamped version, else what the binary's build info says (format.Version).
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return format.Version(buildVersion, bi)
}
