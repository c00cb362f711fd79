package executor

import "github.com/rubberband-hpo/rubberband/internal/infra"

// InfraError is an infrastructure fault (internal/infra): a full disk, a checkpoint store that is
// down or refuses writes, a journal that cannot be written. A gang that ends with one is not
// the trial's failure and spends none of its tries: the run pauses (Run returns a
// *PausedError), releasing its nodes, and `rubberband resume` carries on once it recovers.
// Runtimes return it (wrapped or not) from Launch and Handle.Wait; infra.Classify makes one.
type InfraError = infra.Error
