package admit

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func quota(name string, hard, used map[corev1.ResourceName]string) corev1.ResourceQuota {
	q := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}}
	q.Status.Hard, q.Status.Used = corev1.ResourceList{}, corev1.ResourceList{}
	for k, v := range hard {
		q.Status.Hard[k] = resource.MustParse(v)
	}
	for k, v := range used {
		q.Status.Used[k] = resource.MustParse(v)
	}
	return q
}

// A quota fits when hard less used covers the peak; one that does not is named with what it
// leaves and what the plan needs; quotas on other resources do not matter.
func TestCheckQuotas(t *testing.T) {
	gpus := corev1.ResourceName("requests.nvidia.com/gpu")
	peak := Peak{Pods: 8, GPUs: 16}
	if err := CheckQuotas(nil, peak); err != nil {
		t.Fatalf("no quota: %v", err)
	}
	if err := CheckQuotas([]corev1.ResourceQuota{quota("gpu", map[corev1.ResourceName]string{gpus: "24"}, map[corev1.ResourceName]string{gpus: "8"}),
		quota("cpu", map[corev1.ResourceName]string{"requests.cpu": "1"}, nil)}, peak); err != nil {
		t.Fatalf("16 free for a peak of 16: %v", err)
	}
	err := CheckQuotas([]corev1.ResourceQuota{quota("gpu", map[corev1.ResourceName]string{gpus: "24"}, map[corev1.ResourceName]string{gpus: "9"})}, peak)
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Quota != "gpu" || qe.Free != 15 || qe.Need != 16 || qe.Resource != gpus || !strings.Contains(err.Error(), "ResourceQuota ml/gpu leaves 15 requests.nvidia.com/gpu free") {
		t.Fatalf("15 free for 16: %v", err)
	}
	err = CheckQuotas([]corev1.ResourceQuota{
		quota("pods", map[corev1.ResourceName]string{corev1.ResourcePods: "10"}, map[corev1.ResourceName]string{corev1.ResourcePods: "5"}),
		quota("gpu", map[corev1.ResourceName]string{"limits.nvidia.com/gpu": "4"}, nil)}, peak)
	if !errors.As(err, &qe) || qe.Quota != "gpu" || !strings.Contains(err.Error(), "also short: pods (pods)") {
		t.Fatalf("two short, the tightest first: %v", err)
	}
}
