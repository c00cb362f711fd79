package kube

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// inClusterNamespace is where a pod's ServiceAccount namespace is mounted.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Config finds the cluster as kubectl does: the kubeconfig file given, else the files KUBECONFIG
// lists (or ~/.kube/config), with their current context or context when given; without any,
// inside a pod, its ServiceAccount's credentials. It returns the client configuration and the
// namespace of the context (or of the pod; "default" when none says).
func Config(kubeconfig, context string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := loader.ClientConfig()
	if err == nil {
		ns, _, err := loader.Namespace()
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig: %w", err)
		}
		return cfg, ns, nil
	}
	if !clientcmd.IsEmptyConfig(err) {
		return nil, "", fmt.Errorf("kubeconfig (%s): %w", strings.Join(append([]string{kubeconfig}, rules.Precedence...), ", "), err)
	}
	cfg, inErr := rest.InClusterConfig()
	if inErr != nil {
		if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
			return nil, "", fmt.Errorf("no cluster: KUBECONFIG=%s names no kubeconfig file, and this is not a pod (%v)", env, inErr)
		}
		return nil, "", fmt.Errorf("no cluster: no kubeconfig (set KUBECONFIG, or write %s) and this is not a pod (%v)", strings.Join(rules.Precedence, ", "), inErr)
	}
	ns := "default"
	if b, err := os.ReadFile(inClusterNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
		ns = strings.TrimSpace(string(b))
	}
	return cfg, ns, nil
}
