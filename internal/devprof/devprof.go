// Package devprof profiles a command for its developers: RB_CPUPROFILE=FILE writes where its
// time went, RB_MEMPROFILE=FILE what it held at its end (go tool pprof reads both).
package devprof

import (
	"os"
	"runtime/pprof"
)

// Run runs main under the profiles the environment asks for and returns its exit code. A
// profile that cannot be written is skipped: profiling never changes what the command does.
func Run(main func() int) int {
	if path := os.Getenv("RB_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			defer f.Close()
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	code := main()
	if path := os.Getenv("RB_MEMPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	return code
}
