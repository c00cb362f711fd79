// Package kubenode is a Kubernetes node agent for tests: it stands in for the kubelets of a real
// kube-apiserver (internal/testkit/servers.Kube), which has no container runtime, registry or
// kubelet here. An Agent registers Node objects and runs each pod bound to one of them as a local
// process, reporting its status through the API server as a kubelet does, so that the kube
// backend (executor/kube) runs real trainer processes through a real control plane.
//
// What it does as a kubelet does:
//   - Nodes: capacity and allocatable nvidia.com/gpu, cpu, memory and pods; the hostname,
//     instance-type and karpenter.sh/capacity-type labels; InternalIP and Hostname 127.0.0.1;
//     the kubelet API port in status.daemonEndpoints; a Ready condition (SetReady flips it).
//     A Node deleted by someone else (a Karpenter-like controller) is a machine gone: its pods'
//     processes are killed, as RemoveNode does.
//   - Pods: one watch over all pods, filtered in memory by spec.nodeName. The single container
//     runs as command + args (with $(VAR) expanded), in its own process group, with env and
//     envFrom resolved from the API (Secrets and ConfigMaps are read, never written to disk or
//     logged) and only PATH and HOME from the agent's environment. Status goes Pending →
//     Running → Succeeded or Failed through the status subresource; restartPolicy is Never.
//   - Graceful deletion: SIGTERM to the process group, SIGKILL after the grace period, the
//     terminated status reported, then the pod deleted for good (grace 0, UID precondition). A
//     pod that never started, or whose process had ended, is deleted at once.
//   - Logs: stdout and stderr go to one file per pod under Config.Dir, capped at 64 MiB, served
//     over HTTPS at /containerLogs/{namespace}/{pod}/{container} (follow, tailLines,
//     limitBytes), the path and query the API server's pods/log proxies to.
//
// What it does not: images. There is no container runtime: a container with an image and no
// command fails with reason ImageUnsupported, and one with an image and a command runs that
// command on the host, unconfined, as the test's user. A second container or init containers
// fail the pod (reason UnsupportedPod). Volumes and volume mounts are ignored, and nothing
// is injected that a kubelet adds (service links, a service account token): a process in a pod
// that needs the API gets its credentials through env from a Secret. Pods of a machine that vanished (RemoveNode) keep the
// status last reported, as no node lifecycle controller runs. timestamps and sinceSeconds in a
// log request are ignored, and stdout and stderr are one stream.
package kubenode
