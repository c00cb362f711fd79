package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// Layouts of a run's keys in its store, as the run records it at creation (rundir.RunFile), so
// that a run keeps the layout it started with whichever binary resumes it.
const (
	// LayoutShared is trials/<trial>/… at the store's root, shared by every run on the URL: runs
	// made before layouts were recorded. Trial IDs repeat in every run, so two such runs on one
	// URL read each other's checkpoints; only such old runs use it.
	LayoutShared = ""
	// LayoutPerRun is runs/<run-id>/trials/<trial>/…: each run under a prefix of its own, which
	// it claims (Claim).
	LayoutPerRun = "per-run"
)

// RunPrefix is the prefix under which run runID keeps its keys in layout: "" for LayoutShared.
func RunPrefix(layout, runID string) (string, error) {
	switch layout {
	case LayoutShared:
		return "", nil
	case LayoutPerRun:
		prefix := "runs/" + runID
		if err := CheckKey(prefix); err != nil || strings.Count(prefix, "/") != 1 {
			return "", fmt.Errorf("checkpoint prefix of run %q: %w", runID, ErrBadKey)
		}
		return prefix + "/", nil
	}
	return "", fmt.Errorf("checkpoint layout %q is not one this binary knows (%q or %q)", layout, LayoutShared, LayoutPerRun)
}

// Prefixed is s as seen from under prefix (empty, or keys ending in "/"): every key it is given
// is stored as prefix+key, and List gives keys without prefix, so that whoever uses it (SaveDir,
// RestoreDir, the heartbeat) never builds a run's keys itself. An empty prefix gives s.
func Prefixed(s Store, prefix string) (Store, error) {
	if prefix == "" {
		return s, nil
	}
	if !strings.HasSuffix(prefix, "/") || CheckKey(strings.TrimSuffix(prefix, "/")) != nil {
		return nil, fmt.Errorf("%w: prefix %q", ErrBadKey, prefix)
	}
	return &prefixed{s: s, prefix: prefix}, nil
}

var _ Store = (*prefixed)(nil)

type prefixed struct {
	s      Store
	prefix string
}

// full checks key before it is prefixed: "" or ".." must not turn into a valid key of the
// prefix's parent.
func (p *prefixed) full(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return p.prefix + key, nil
}

func (p *prefixed) strip(info Info) Info {
	info.Key = strings.TrimPrefix(info.Key, p.prefix)
	return info
}

func (p *prefixed) Put(ctx context.Context, key string, r io.Reader) (Info, error) {
	full, err := p.full(key)
	if err != nil {
		return Info{}, err
	}
	info, err := p.s.Put(ctx, full, r)
	return p.strip(info), err
}

func (p *prefixed) Open(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	full, err := p.full(key)
	if err != nil {
		return nil, Info{}, err
	}
	rc, info, err := p.s.Open(ctx, full)
	return rc, p.strip(info), err
}

func (p *prefixed) List(ctx context.Context, prefix string) ([]Info, error) {
	list, err := p.s.List(ctx, p.prefix+prefix)
	for i := range list {
		list[i] = p.strip(list[i])
	}
	return list, err
}

func (p *prefixed) Delete(ctx context.Context, key string) error {
	full, err := p.full(key)
	if err != nil {
		return err
	}
	return p.s.Delete(ctx, full)
}

// OwnerKey is where a run's ownership marker lives under its prefix (Claim).
const OwnerKey = "owner.json"

// Owner is what a run's marker says of it.
type Owner struct {
	RunID      string `json:"run_id"`
	Experiment string `json:"experiment,omitempty"`
}

// ErrClaimed: the keys a run would use hold another run's, or keys of no known run.
var ErrClaimed = errors.New("the checkpoint prefix belongs to another run")

// Claim makes s, a run's store under its own prefix (Prefixed), owner's: it writes owner's
// marker where there is none and nothing else, and passes when the marker is owner's already (a
// resumed run). A marker of another run, or keys without a marker, are refused with ErrClaimed
// naming what was found: whatever wrote them, a run that read them would report their results
// as its own.
func Claim(ctx context.Context, s Store, owner Owner) error {
	rc, _, err := s.Open(ctx, OwnerKey)
	switch {
	case err == nil:
		var found Owner
		derr := json.NewDecoder(rc).Decode(&found)
		if _, rest := io.Copy(io.Discard, rc); derr == nil { // the end is where the sha256 is checked
			derr = rest
		}
		rc.Close()
		if derr != nil {
			return fmt.Errorf("read the checkpoint owner marker %s: %w", OwnerKey, derr)
		}
		if found.RunID != owner.RunID {
			return fmt.Errorf("%w: it holds run %s's checkpoints (experiment %q; its %s), not run %s's", ErrClaimed, found.RunID, found.Experiment, OwnerKey, owner.RunID)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read the checkpoint owner marker %s: %w", OwnerKey, err)
	}
	keys, err := s.List(ctx, "")
	if err != nil {
		return fmt.Errorf("claim the checkpoint prefix: %w", err)
	}
	if len(keys) > 0 {
		return fmt.Errorf("%w: it holds %d key(s) (%s, …) and no %s of run %s", ErrClaimed, len(keys), keys[0].Key, OwnerKey, owner.RunID)
	}
	b, err := json.Marshal(owner)
	if err != nil {
		return err
	}
	if _, err := s.Put(ctx, OwnerKey, strings.NewReader(string(b))); err != nil {
		return fmt.Errorf("claim the checkpoint prefix: %w", err)
	}
	return nil
}
