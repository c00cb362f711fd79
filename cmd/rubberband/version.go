package main

import "runtime/debug"

// buildVersion is stamped by `make build` (-ldflags "-X main.buildVersion=..."): the one value
// the linker sets, so it is a variable.
var buildVersion string

// version is the stamped version, else the module's (go install pkg@v1.2.3), else "dev".
func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
