package kubenode

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resolveEnv makes the container's environment, retrying while a Secret or ConfigMap it names is
// missing (the container waits, CreateContainerConfigError, as under a kubelet). It reports false
// when the pod was deleted or killed meanwhile.
func (r *podRun) resolveEnv(ctx context.Context, c corev1.Container) ([]string, bool) {
	last := ""
	for {
		env, err := r.env(ctx, c)
		if err == nil {
			return env, true
		}
		if msg := err.Error(); msg != last {
			last = msg
			r.a.logf("pod %s: %v", r.name(), err)
			r.waiting(ctx, c, "CreateContainerConfigError", msg)
		}
		select {
		case <-r.terminating:
			return nil, false
		case <-r.killed:
			return nil, false
		case <-time.After(time.Second):
		}
	}
}

// env is PATH and HOME from the agent's environment, then envFrom, then env, each overriding
// what came before; env values expand $(VAR) of what came before, as Kubernetes does. Values are
// never part of an error.
func (r *podRun) env(ctx context.Context, c corev1.Container) ([]string, error) {
	var e envList
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			e.set(k, v)
		}
	}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.SecretRef != nil:
			s, err := r.secret(ctx, from.SecretRef.Name, from.SecretRef.Optional)
			if err != nil {
				return nil, err
			}
			data = map[string]string{}
			for k, v := range s {
				data[k] = string(v)
			}
		case from.ConfigMapRef != nil:
			var err error
			if data, err = r.configMap(ctx, from.ConfigMapRef.Name, from.ConfigMapRef.Optional); err != nil {
				return nil, err
			}
		}
		for k, v := range data {
			e.set(from.Prefix+k, v)
		}
	}
	for _, v := range c.Env {
		if v.ValueFrom == nil {
			e.set(v.Name, expand(v.Value, e.lookup))
			continue
		}
		val, ok, err := r.valueFrom(ctx, v.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", v.Name, err)
		}
		if ok {
			e.set(v.Name, val)
		}
	}
	return e.strings(), nil
}

func (r *podRun) valueFrom(ctx context.Context, src *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := r.secret(ctx, ref.Name, ref.Optional)
		if err != nil {
			return "", false, err
		}
		v, ok := s[ref.Key]
		if !ok && !isTrue(ref.Optional) {
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, r.pod.Namespace, ref.Name)
		}
		return string(v), ok, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		m, err := r.configMap(ctx, ref.Name, ref.Optional)
		if err != nil {
			return "", false, err
		}
		v, ok := m[ref.Key]
		if !ok && !isTrue(ref.Optional) {
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, r.pod.Namespace, ref.Name)
		}
		return v, ok, nil
	case src.FieldRef != nil:
		p := r.pod
		switch path := src.FieldRef.FieldPath; path {
		case "metadata.name":
			return p.Name, true, nil
		case "metadata.namespace":
			return p.Namespace, true, nil
		case "metadata.uid":
			return string(p.UID), true, nil
		case "spec.nodeName":
			return p.Spec.NodeName, true, nil
		case "spec.serviceAccountName":
			return p.Spec.ServiceAccountName, true, nil
		case "status.podIP", "status.hostIP":
			return "127.0.0.1", true, nil
		default:
			for prefix, m := range map[string]map[string]string{"metadata.labels": p.Labels, "metadata.annotations": p.Annotations} {
				if k, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(k, "']") {
					return m[strings.TrimSuffix(k, "']")], true, nil
				}
			}
			return "", false, fmt.Errorf("unsupported fieldRef %s", path)
		}
	default:
		return "", false, fmt.Errorf("unsupported valueFrom (kubenode reads secretKeyRef, configMapKeyRef and fieldRef)")
	}
}

// secret reads a Secret from the API, as a kubelet does; a missing optional one is empty.
func (r *podRun) secret(ctx context.Context, name string, optional *bool) (map[string][]byte, error) {
	s, err := r.a.client.CoreV1().Secrets(r.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && isTrue(optional) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", r.pod.Namespace, name, err)
	}
	return s.Data, nil
}

func (r *podRun) configMap(ctx context.Context, name string, optional *bool) (map[string]string, error) {
	m, err := r.a.client.CoreV1().ConfigMaps(r.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && isTrue(optional) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", r.pod.Namespace, name, err)
	}
	return m.Data, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// envList is an environment in the order names were first set.
type envList struct {
	names []string
	vals  map[string]string
}

func (e *envList) set(k, v string) {
	if e.vals == nil {
		e.vals = map[string]string{}
	}
	if _, ok := e.vals[k]; !ok {
		e.names = append(e.names, k)
	}
	e.vals[k] = v
}

func (e *envList) lookup(k string) (string, bool) {
	v, ok := e.vals[k]
	return v, ok
}

func (e *envList) strings() []string {
	out := make([]string, 0, len(e.names))
	for _, k := range e.names {
		out = append(out, k+"="+e.vals[k])
	}
	return out
}

// envLookup looks names up in a "K=V" environment.
func envLookup(env []string) func(string) (string, bool) {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// expand replaces $(NAME) with NAME's value where it is defined and $$ with $, leaving any other
// reference as written: Kubernetes' expansion of env values, command and args.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
