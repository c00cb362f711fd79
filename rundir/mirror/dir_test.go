package mirror_test

import (
	"testing"

	"github.com/rubberband-hpo/rubberband/rundir/mirror"
	"github.com/rubberband-hpo/rubberband/rundir/mirror/mirrortest"
)

func TestDirStore(t *testing.T) {
	mirrortest.Run(t, func(t *testing.T) mirror.Store { return &mirror.Dir{Root: t.TempDir()} })
}
