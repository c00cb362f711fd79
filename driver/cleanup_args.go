package driver

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/format"
)

// CheckCleanup says, matching ErrInput, why `cleanup` cannot act on backend ("" when none was
// given) with filter f: only a backend whose machines outlive a run has any to clean up, and f
// names one experiment or all of them.
func CheckCleanup(backend string, f ec2.Filter) error {
	outlives := func(k Kind) bool { return k.OutlivesRun }
	switch kind, err := Lookup(backend); {
	case backend == "":
		return inputErr("cleanup needs --backend %s, the only backend whose machines can outlive a run", Names(outlives))
	case err != nil:
		return inputErr("--backend %q is not a backend cleanup knows (%s)", backend, Names(outlives))
	case !kind.OutlivesRun:
		return inputErr("cleanup is for --backend %s: %s runs release their nodes themselves when they stop "+
			"(`rubberband cancel RUN` stops one and releases its nodes)", Names(outlives), backend)
	case (f.Experiment == "") == !f.All:
		return inputErr("cleanup needs exactly one of --experiment NAME and --all")
	}
	return nil
}

// CleanupWhat is whose instances f names, in words: "experiment NAME" or "every experiment".
func CleanupWhat(f ec2.Filter) string {
	if f.All {
		return "every experiment"
	}
	return "experiment " + f.Experiment
}

// CleanupCount is what cleanup found, counted in words ("2 instances and 1 security group").
func CleanupCount(insts []ec2.Instance, groups []ec2.Group) string {
	return strings.Join(slices.DeleteFunc([]string{plural(len(insts), "instance"), plural(len(groups), "security group")},
		func(s string) bool { return s == "" }), " and ")
}

// WriteFound writes what cleanup found in region and would terminate and delete, asking first.
func WriteFound(w io.Writer, region string, insts []ec2.Instance, groups []ec2.Group) {
	fmt.Fprintf(w, "would terminate and delete, in %s:\n", region)
	if len(insts) > 0 {
		WriteInstances(w, insts, "STATE")
	}
	if len(groups) > 0 {
		WriteGroups(w, groups)
	}
}

// plural is n things, or "" for none.
func plural(n int, thing string) string {
	if n == 0 {
		return ""
	}
	return format.Plural(n, thing)
}
