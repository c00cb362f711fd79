package admit

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// GPUResource is the extended resource of NVIDIA's device plugin, which pods ask for.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// Peak is the most a plan holds at once in one namespace: pods (one per worker) and GPUs.
type Peak struct {
	Pods, GPUs int
}

// QuotaError says which quota cannot fit a plan's peak, and by how much.
type QuotaError struct {
	Quota, Namespace string
	Resource         corev1.ResourceName
	Need, Free       int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("ResourceQuota %s/%s leaves %d %s free, and the plan needs %d at its peak: raise the quota, or plan with fewer nodes (cluster.max_nodes)",
		e.Namespace, e.Quota, e.Free, e.Resource, e.Need)
}

// CheckQuotas refuses a peak that one of the namespace's quotas cannot fit: GPUs against
// requests.nvidia.com/gpu (and limits.), pods against pods, each against hard less used (what
// other pods of the namespace hold now). Every quota that fails is named, the tightest first.
func CheckQuotas(quotas []corev1.ResourceQuota, peak Peak) error {
	var errs []*QuotaError
	for _, q := range quotas {
		for _, c := range []struct {
			res  corev1.ResourceName
			need int
		}{{"requests." + GPUResource, peak.GPUs}, {"limits." + GPUResource, peak.GPUs}, {corev1.ResourcePods, peak.Pods}} {
			hard, ok := q.Status.Hard[c.res]
			if !ok {
				if hard, ok = q.Spec.Hard[c.res]; !ok {
					continue
				}
			}
			used := q.Status.Used[c.res]
			free := hard.Value() - used.Value()
			if int64(c.need) > free {
				errs = append(errs, &QuotaError{Quota: q.Name, Namespace: q.Namespace, Resource: c.res, Need: int64(c.need), Free: max(free, 0)})
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Free-errs[i].Need < errs[j].Free-errs[j].Need })
	if len(errs) == 1 {
		return errs[0]
	}
	var more []string
	for _, e := range errs[1:] {
		more = append(more, e.Quota+" ("+string(e.Resource)+")")
	}
	return fmt.Errorf("%w; also short: %s", errs[0], strings.Join(more, ", "))
}
