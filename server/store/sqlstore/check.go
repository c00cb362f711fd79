package sqlstore

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// The checks below hold both databases to one rule: what one of them would refuse (PostgreSQL's
// text takes no NUL and no invalid UTF-8, SQLite turns NaN into NULL) neither takes, and nothing
// a caller sends can grow a row past the bounds of package store.

func checkName(what, v string) error {
	if v == "" {
		return fmt.Errorf("%w: empty %s", store.ErrInvalid, what)
	}
	return checkText(what, v, store.MaxNameBytes)
}

func checkText(what, v string, max int) error {
	switch {
	case len(v) > max:
		return fmt.Errorf("%w: %s is %d bytes, over the bound of %d", store.ErrInvalid, what, len(v), max)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not UTF-8", store.ErrInvalid, what)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s holds a NUL byte", store.ErrInvalid, what)
	}
	return nil
}

func checkBytes(what string, b []byte, max int) error {
	if len(b) > max {
		return fmt.Errorf("%w: %s is %d bytes, over the bound of %d", store.ErrInvalid, what, len(b), max)
	}
	return nil
}

// checkNumber refuses what is not a number, and negatives where counts and money are meant.
func checkNumber(what string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("%w: %s is %v", store.ErrInvalid, what, v)
	}
	return nil
}

func checkFinite(what string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %s is %v", store.ErrInvalid, what, v)
	}
	return nil
}

func checkCount(what string, v int) error {
	if v < 0 {
		return fmt.Errorf("%w: %s is %d", store.ErrInvalid, what, v)
	}
	return nil
}

func checkMonth(month string) error {
	if t, err := time.Parse("2006-01", month); err != nil || t.Format("2006-01") != month {
		return fmt.Errorf("%w: month %q is not YYYY-MM", store.ErrInvalid, month)
	}
	return nil
}

func checkTeam(t store.Team) error {
	err := firstErr(
		checkName("team name", t.Name),
		checkCount("max GPUs", t.MaxGPUs),
		checkCount("max nodes", t.MaxNodes),
		checkNumber("monthly budget", t.MonthlyBudgetUSD),
		checkCount("max queued runs", t.MaxQueuedRuns),
	)
	if err == nil && len(t.StoragePrefixes) > store.MaxStoragePrefixes {
		err = fmt.Errorf("%w: %d storage prefixes, over the bound of %d", store.ErrInvalid, len(t.StoragePrefixes), store.MaxStoragePrefixes)
	}
	for _, p := range t.StoragePrefixes {
		if err != nil {
			break
		}
		// Newline-separated in one column: an empty one or one with a newline would not come back.
		if err = checkText("storage prefix", p, store.MaxTextBytes); err == nil && (p == "" || strings.ContainsAny(p, "\r\n")) {
			err = fmt.Errorf("%w: storage prefix %q is empty or holds a newline", store.ErrInvalid, p)
		}
	}
	return err
}

func checkUser(u store.User) error {
	err := firstErr(checkName("user name", u.Name), checkName("team name", u.Team),
		checkBytes("token hash", u.TokenHash, 64))
	if err == nil && len(u.TokenHash) == 0 {
		err = fmt.Errorf("%w: empty token hash", store.ErrInvalid)
	}
	return err
}

func checkRun(r *store.Run) error {
	err := firstErr(
		checkName("run ID", r.ID),
		checkName("team name", r.Team),
		checkText("user name", r.User, store.MaxNameBytes),
		checkText("experiment name", r.Name, store.MaxTextBytes),
		checkBytes("spec", r.Spec, store.MaxSpecBytes),
		checkBytes("plan", r.Plan, store.MaxPlanBytes),
		checkNumber("predicted cost", r.PredictedCostUSD),
		checkNumber("predicted JCT", r.PredictedJCTSeconds),
		checkCount("GPUs", r.GPUs),
		checkCount("nodes", r.Nodes),
		checkNumber("cost", r.CostUSD),
		checkText("dir", r.Dir, store.MaxTextBytes),
		checkText("message", r.Message, store.MaxTextBytes),
	)
	if err != nil {
		return err
	}
	if r.SubmittedAt.IsZero() {
		return fmt.Errorf("%w: no submission time", store.ErrInvalid)
	}
	switch r.State {
	case store.Queued, store.Running, store.Paused, store.Finished, store.Failed, store.Cancelled:
		return nil
	}
	return fmt.Errorf("%w: state %q", store.ErrInvalid, r.State)
}

func checkAudit(e store.AuditEntry) error {
	return firstErr(
		checkText("user name", e.User, store.MaxNameBytes),
		checkText("team name", e.Team, store.MaxNameBytes),
		checkName("action", e.Action),
		checkText("target", e.Target, store.MaxTextBytes),
		checkText("detail", e.Detail, store.MaxTextBytes),
	)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
