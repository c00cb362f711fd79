package nomad

import (
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/infra"
)

// A worker that exited worker.ExitInfra said which fault on its standard error: the gang's
// result is that fault, what and where, so that the executor spends no try on it.
func TestInfraFaultFromWorker(t *testing.T) {
	stderr := "=== rank 0 on node n1\nrubberband: infrastructure fault: disk full at /var/rb/ckpt/trials/b0-t0001: put: no space left on device\n"
	f := infraFault(stderr, 0)
	if f.What != infra.DiskFull || f.Where != "/var/rb/ckpt/trials/b0-t0001" {
		t.Fatalf("%q at %q", f.What, f.Where)
	}
	if f := infraFault("rubberband: worker: restore: s3: 503\n", 1); f.What != infra.StoreDown || f.Where != "rank 1's node" {
		t.Fatalf("a fault the worker did not name: %q at %q", f.What, f.Where)
	}
}
