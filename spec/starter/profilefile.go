package starter

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rubberband-hpo/rubberband/spec"
)

// ErrNeedOut is a profile that has no file to go to unless the user names one (--out).
var ErrNeedOut = errors.New("--out is needed")

// ProfileFile is the file `rubberband profile` writes exp's profile to: out when the user named
// one; else the file the spec's profile names (measured again); else, for a spec without a
// profile, SPEC's name with .profile.yaml beside it. An inline profile is never rewritten, nor a
// spec's own file with the profile of another instance type (otherType): ErrNeedOut then.
func ProfileFile(exp *spec.Experiment, out, otherType string) (string, error) {
	if out != "" {
		return out, nil
	}
	if otherType != "" { // the spec's own profile file is not that type's
		return "", fmt.Errorf("%w with --instance-type: the file of %s's profile", ErrNeedOut, otherType)
	}
	if f := exp.ProfileFile(); f != "" {
		if filepath.IsAbs(f) {
			return f, nil
		}
		return filepath.Join(filepath.Dir(exp.File), f), nil
	}
	if exp.MissingProfile() {
		base := strings.TrimSuffix(filepath.Base(exp.File), filepath.Ext(exp.File))
		return filepath.Join(filepath.Dir(exp.File), base+".profile.yaml"), nil
	}
	return "", fmt.Errorf("%w: %s's profile is inline (profile: {file: F} would be measured again into F)", ErrNeedOut, exp.File)
}

// NameProfile names the profile written to out in exp's spec, which gives none (AddProfileFile):
// relative to the spec's folder, unless the user gave it absolute (keepAbs). The new spec must
// parse with opts, its files read beside it. It returns the name the spec now gives.
func NameProfile(exp *spec.Experiment, out string, keepAbs bool, opts ...spec.Option) (string, error) {
	rel := out
	if !keepAbs {
		dir, err := filepath.Abs(filepath.Dir(exp.File))
		if err != nil {
			return "", err
		}
		abs, err := filepath.Abs(out)
		if err != nil {
			return "", err
		}
		if rel, err = filepath.Rel(dir, abs); err != nil {
			return "", err
		}
	}
	check := func(data []byte) error {
		_, err := spec.Parse(exp.File, data, func(name string) ([]byte, error) {
			if !filepath.IsAbs(name) {
				name = filepath.Join(filepath.Dir(exp.File), name)
			}
			return spec.ReadFile(name)
		}, opts...)
		return err
	}
	return rel, AddProfileFile(exp.File, rel, check)
}
