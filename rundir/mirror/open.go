package mirror

import (
	"context"
	"fmt"
	"strings"
)

// A server with a mirror tells the drivers it starts where it is in their environment: EnvAt
// is where (dir:PATH, or the server's database URL), EnvRun the run's key there.
const (
	EnvAt  = "RUBBERBAND_MIRROR"
	EnvRun = "RUBBERBAND_MIRROR_RUN"
)

// OpenDB opens the mirror a database at url holds (sqlstore's RunFiles); the function it
// returns closes the database. It is passed in because the database's package imports this one.
type OpenDB func(ctx context.Context, url string) (Store, func(), error)

// Open opens the mirror at (EnvAt's value): dir:PATH is a folder (Dir), anything else a
// database's URL, opened with openDB. The function it returns closes it.
func Open(ctx context.Context, at string, openDB OpenDB) (Store, func(), error) {
	if dir, ok := strings.CutPrefix(at, "dir:"); ok {
		return &Dir{Root: dir}, func() {}, nil
	}
	st, closeDB, err := openDB(ctx, at)
	if err != nil {
		return nil, nil, fmt.Errorf("the run's mirror: %w", err)
	}
	return st, closeDB, nil
}
