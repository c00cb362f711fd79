package nomad

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/worker"
)

// What a gang on a team's own clients (Runtime.PinNodeID) needs beyond a gang on rubberband's:
// clients pinned by their Nomad node ID, GPUs Nomad accounts for, and the clients' node pool.

// gpuDevice is the device a worker asks Nomad for, one instance per GPU.
const gpuDevice = "nvidia/gpu"

// pin is the constraint that puts a task group on its node.
func (r *Runtime) pin(node string) *nomad.Constraint {
	if r.PinNodeID {
		return nomad.NewConstraint("${node.unique.id}", "=", node)
	}
	return nomad.NewConstraint("${meta."+NodeMeta+"}", "=", node)
}

// nodeFacts is what job building needs of a team's client.
type nodeFacts struct {
	pool string
	gpus bool // it fingerprints nvidia/gpu devices
}

// onClients fits a job pinned by node ID to the clients it runs on: each worker on a client with
// nvidia/gpu devices asks for its GPUs as devices, so that Nomad keeps the team's other jobs off
// them; and the job runs in its clients' node pool ("all" when they are in several), where the
// team's autoscaler counts it. A client Nomad does not know is left as it is: the plan refuses
// the gang with Nomad's reason.
func (r *Runtime) onClients(ctx context.Context, job *nomad.Job, g gang.Gang) error {
	if !r.PinNodeID {
		return nil
	}
	pools := map[string]bool{}
	for i, w := range g.Workers {
		f, ok, err := r.facts(ctx, w.Node.ID)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		pools[f.pool] = true
		if !f.gpus || len(w.Env.GPUs) == 0 {
			continue
		}
		task := job.TaskGroups[i].Tasks[0]
		count := uint64(len(w.Env.GPUs))
		task.Resources.Devices = append(task.Resources.Devices, &nomad.RequestedDevice{Name: gpuDevice, Count: &count})
		task.Env[worker.GPUDevicesEnv] = "1"
	}
	pool := "all"
	if len(pools) == 1 {
		for p := range pools {
			pool = p
		}
	}
	job.NodePool = &pool
	return nil
}

// facts looks a client up once; ok is false when Nomad does not know it.
func (r *Runtime) facts(ctx context.Context, id string) (nodeFacts, bool, error) {
	r.mu.Lock()
	f, ok := r.nodes[id]
	r.mu.Unlock()
	if ok {
		return f, true, nil
	}
	n, _, err := r.Client.Nodes().Info(id, (&nomad.QueryOptions{}).WithContext(ctx))
	var unexpected nomad.UnexpectedResponseError
	if errors.As(err, &unexpected) && unexpected.StatusCode() == http.StatusNotFound {
		return nodeFacts{}, false, nil
	}
	if err != nil {
		return nodeFacts{}, false, fmt.Errorf("look up node %s: %w", id, err)
	}
	f = nodeFacts{pool: n.NodePool}
	if n.NodeResources != nil {
		for _, d := range n.NodeResources.Devices {
			f.gpus = f.gpus || (d.Vendor == "nvidia" && d.Type == "gpu" && len(d.Instances) > 0)
		}
	}
	r.mu.Lock()
	if r.nodes == nil {
		r.nodes = map[string]nodeFacts{}
	}
	r.nodes[id] = f
	r.mu.Unlock()
	return f, true, nil
}
