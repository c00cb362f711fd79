package mirror_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rubberband-hpo/rubberband/rundir/mirror"
)

// dir:PATH is a folder and never a database; anything else is the database's URL, its errors
// saying they are the mirror's.
func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	noDB := func(context.Context, string) (mirror.Store, func(), error) {
		t.Error("dir:PATH opened a database")
		return nil, nil, errors.New("no database")
	}
	st, closeIt, err := mirror.Open(ctx, "dir:/srv/mirror", noDB)
	if err != nil {
		t.Fatal(err)
	}
	closeIt()
	if d, ok := st.(*mirror.Dir); !ok || d.Root != "/srv/mirror" {
		t.Errorf("dir:/srv/mirror: %#v", st)
	}

	db := &mirror.Dir{Root: "db"}
	closed := false
	var asked string
	st, closeIt, err = mirror.Open(ctx, "postgres://rb@db/rb", func(_ context.Context, url string) (mirror.Store, func(), error) {
		asked = url
		return db, func() { closed = true }, nil
	})
	if err != nil || st != mirror.Store(db) || asked != "postgres://rb@db/rb" {
		t.Fatalf("a database URL: %v, %v, asked %q", st, err, asked)
	}
	closeIt()
	if !closed {
		t.Error("closing the mirror left its database open")
	}

	down := errors.New("connection refused")
	_, _, err = mirror.Open(ctx, "postgres://rb@db/rb", func(context.Context, string) (mirror.Store, func(), error) { return nil, nil, down })
	if !errors.Is(err, down) || err.Error() != "the run's mirror: connection refused" {
		t.Errorf("a database that does not open: %v", err)
	}
}
