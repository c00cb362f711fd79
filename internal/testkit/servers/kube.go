package servers

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/rubberband-hpo/rubberband/executor/clock"
)

// Kube is a real Kubernetes control plane: etcd and kube-apiserver, built by `make deps` from the
// tool module tools/kube, on loopback ports, with certificates of their own and RBAC
// authorization. It runs no scheduler, controller manager or kubelet: pods are bound to nodes by
// whoever creates them (rubberband's placement) and run by in-repo node agents
// (internal/testkit/kubenode), and whatever a controller would do the test harness does.
//
// Starting one takes seconds, so a test package shares one (KubeMain) and each test works in a
// namespace of its own (Namespace).
type Kube struct {
	// URL is the API server, https://127.0.0.1:PORT.
	URL string
	// CA is the PEM certificate of the authority that signed the API server's serving
	// certificate and every client certificate the helper makes.
	CA []byte
	// Admin is a client configuration in group system:masters (a client certificate).
	Admin *rest.Config
	// Client is a clientset on Admin.
	Client kubernetes.Interface

	dir            string
	caCert         *x509.Certificate
	caKey          *ecdsa.PrivateKey
	etcd, apiserve *exec.Cmd
	apiExited      chan struct{} // closed when the API server has exited
	extra          []*exec.Cmd   // the controller manager and the scheduler, when started
	controllers    sync.Once
	controllersErr error
	logs           []*os.File
}

// StartKube starts a control plane for one test and stops it when the test ends. A test package
// that has several tests shares one through KubeMain.
func StartKube(t testing.TB) *Kube {
	t.Helper()
	etcd, api := Binary(t, "etcd", "RB_ETCD_BIN"), Binary(t, "kube-apiserver", "RB_KUBE_APISERVER_BIN")
	k, err := RunKube(etcd, api)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	return k
}

// KubeMain runs a test package's tests with one control plane for all of them, in *k, and
// returns the exit code for os.Exit. Without the binaries *k stays nil and the tests that need it
// skip (NeedKube), except under CI, where the package fails.
func KubeMain(m *testing.M, k **Kube) int {
	etcd, api := binaryPath("etcd", "RB_ETCD_BIN"), binaryPath("kube-apiserver", "RB_KUBE_APISERVER_BIN")
	if etcd == "" || api == "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintln(os.Stderr, "no etcd or kube-apiserver binary: run `make deps` (or set RB_ETCD_BIN, RB_KUBE_APISERVER_BIN)")
			return 1
		}
		return m.Run()
	}
	started, err := RunKube(etcd, api)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*k = started
	defer started.Stop()
	return m.Run()
}

// NeedKube skips the test when the package has no control plane (KubeMain found no binaries
// outside CI).
func NeedKube(t testing.TB, k *Kube) *Kube {
	t.Helper()
	if k == nil {
		t.Skip("no etcd or kube-apiserver binary: run `make deps`")
	}
	return k
}

// binaryPath is Binary without a test: "" when there is none.
func binaryPath(name, env string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, ".tools", "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// RunKube starts etcd and the API server and waits until the API server is ready; Stop ends both
// and removes their data.
func RunKube(etcdBin, apiBin string) (*Kube, error) {
	k := &Kube{}
	if err := k.run(etcdBin, apiBin); err != nil {
		k.Stop()
		return nil, err
	}
	return k, nil
}

func (k *Kube) run(etcdBin, apiBin string) (err error) {
	if k.dir, err = os.MkdirTemp("", "rb-kube-"); err != nil {
		return err
	}
	if err := k.certificates(); err != nil {
		return fmt.Errorf("kube certificates: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	// Durability buys a test's throwaway store nothing: no fsync.
	k.etcd, err = k.start("etcd", etcdBin, "--name", "rb", "--data-dir", filepath.Join(k.dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "rb="+peerURL, "--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return err
	}
	if err := waitTCP(fmt.Sprintf("127.0.0.1:%d", etcdClient), 30*time.Second); err != nil {
		return fmt.Errorf("etcd: %w\n%s", err, k.logTail(0))
	}
	f := func(name string) string { return filepath.Join(k.dir, name) }
	k.apiserve, err = k.start("kube-apiserver", apiBin,
		"--etcd-servers", etcdURL, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(apiPort), "--cert-dir", f("apiserver-certs"),
		"--tls-cert-file", f("serving.crt"), "--tls-private-key-file", f("serving.key"),
		"--client-ca-file", f("ca.crt"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", f("sa.key"), "--service-account-signing-key-file", f("sa.key"),
		"--authorization-mode", "RBAC", "--anonymous-auth=false",
		"--service-cluster-ip-range", "10.96.0.0/24", "--allow-privileged",
		// Logs and exec go to the node agents' kubelet API, whose certificates this CA signs.
		"--kubelet-client-certificate", f("kubelet-client.crt"), "--kubelet-client-key", f("kubelet-client.key"),
		"--kubelet-certificate-authority", f("ca.crt"), "--kubelet-preferred-address-types", "InternalIP",
		// The kubernetes Service's endpoints would be this loopback address, which the reconciler
		// refuses; nothing here reaches the API server through the Service.
		"--endpoint-reconciler-type", "none",
		"--profiling=false", "--v", "0")
	if err != nil {
		return err
	}
	k.apiExited = make(chan struct{})
	go func(cmd *exec.Cmd) { cmd.Wait(); close(k.apiExited) }(k.apiserve)
	k.URL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if err := k.admin(); err != nil {
		return err
	}
	if err := k.waitReady(90 * time.Second); err != nil {
		return fmt.Errorf("kube-apiserver: %w\n%s", err, k.logTail(1))
	}
	return nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (k *Kube) start(name, bin string, args ...string) (*exec.Cmd, error) {
	log, err := os.Create(filepath.Join(k.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	k.logs = append(k.logs, log)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// A group of its own, so that Stop ends it, and the kernel ends it with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return cmd, nil
}

func (k *Kube) logTail(i int) string {
	if i >= len(k.logs) {
		return ""
	}
	b, _ := os.ReadFile(k.logs[i].Name())
	return tail(b)
}

func (k *Kube) admin() error {
	crt, key, err := k.ClientCertificate("rubberband-admin", "system:masters")
	if err != nil {
		return err
	}
	k.Admin = &rest.Config{Host: k.URL, TLSClientConfig: rest.TLSClientConfig{CAData: k.CA, CertData: crt, KeyData: key},
		QPS: 500, Burst: 1000}
	k.Client, err = kubernetes.NewForConfig(k.Admin)
	return err
}

func (k *Kube) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		body, err := k.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
			// RBAC's bootstrap roles come with readiness; so does the default namespace.
			if _, err := k.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
				return nil
			}
		}
		if err != nil {
			last = err
		}
		select {
		case <-k.apiExited:
			return fmt.Errorf("exited")
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %v", timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends the API server and etcd and removes their data.
func (k *Kube) Stop() {
	for _, c := range k.extra {
		stopGroup(c, 10*time.Second)
	}
	k.extra = nil
	if k.apiserve != nil {
		// Its Wait is the goroutine's, which closes apiExited.
		syscall.Kill(-k.apiserve.Process.Pid, syscall.SIGTERM)
		select {
		case <-k.apiExited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-k.apiserve.Process.Pid, syscall.SIGKILL)
			<-k.apiExited
		}
	}
	stopGroup(k.etcd, 10*time.Second)
	k.apiserve, k.etcd = nil, nil
	for _, l := range k.logs {
		l.Close()
	}
	k.logs = nil
	if k.dir != "" {
		os.RemoveAll(k.dir)
	}
}

// Namespace makes a namespace of the test's own, with the "default" ServiceAccount a controller
// manager would have made (pods name it), and deletes it when the test ends (its objects stay in
// etcd: no controller manager collects them, and the control plane dies with the package).
func (k *Kube) Namespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	ns, err := k.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rb-test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	if _, err := k.Client.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create default service account: %v", err)
	}
	return ns.Name
}

// Token asks the API server for a token of a ServiceAccount (TokenRequest), valid an hour: what
// a pod running as it would be given.
func (k *Kube) Token(ctx context.Context, namespace, serviceAccount string) (string, error) {
	expiry := int64(3600)
	tr, err := k.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", namespace, serviceAccount, err)
	}
	return tr.Status.Token, nil
}

// As is a client configuration that authenticates with a bearer token (a ServiceAccount's).
func (k *Kube) As(token string) *rest.Config {
	return &rest.Config{Host: k.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: k.CA}, QPS: 500, Burst: 1000}
}

// Kubeconfig writes a kubeconfig file for cfg (its token or client certificate) in dir, with
// namespace as the context's, and returns its path: what a user's KUBECONFIG points at.
func (k *Kube) Kubeconfig(dir string, cfg *rest.Config, namespace string) (string, error) {
	var user bytes.Buffer
	switch {
	case cfg.BearerToken != "":
		fmt.Fprintf(&user, "    token: %s\n", cfg.BearerToken)
	default:
		fmt.Fprintf(&user, "    client-certificate-data: %s\n    client-key-data: %s\n", b64(cfg.CertData), b64(cfg.KeyData))
	}
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: test
  user:
%scontexts:
- name: test
  context:
    cluster: test
    user: test
    namespace: %s
current-context: test
`, k.URL, b64(k.CA), user.String(), namespace)
	p := filepath.Join(dir, "kubeconfig")
	return p, os.WriteFile(p, []byte(body), 0o600)
}

// ClientCertificate signs a client certificate for user in groups, as PEM certificate and key.
func (k *Kube) ClientCertificate(user string, groups ...string) (crt, key []byte, err error) {
	return k.sign(pkix.Name{CommonName: user, Organization: groups}, nil, x509.ExtKeyUsageClientAuth)
}

// ServingTLS is a TLS configuration for a server on 127.0.0.1 whose certificate the API server
// trusts (a node agent's kubelet API), asking for and checking client certificates of the CA
// (the API server's own, for logs).
func (k *Kube) ServingTLS() (*tls.Config, error) {
	crt, key, err := k.sign(pkix.Name{CommonName: "rb-node-agent"}, []net.IP{net.IPv4(127, 0, 0, 1)}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(k.caCert)
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

// certificates makes the CA, the API server's serving certificate, its client certificate for
// kubelets, and the service account signing key, as files in k.dir.
func (k *Kube) certificates() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rubberband-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if k.caCert, err = x509.ParseCertificate(der); err != nil {
		return err
	}
	k.caKey = key
	k.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	files := map[string][]byte{"ca.crt": k.CA}
	servingCrt, servingKey, err := k.sign(pkix.Name{CommonName: "kube-apiserver"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)}, x509.ExtKeyUsageServerAuth,
		"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
	if err != nil {
		return err
	}
	files["serving.crt"], files["serving.key"] = servingCrt, servingKey
	kcCrt, kcKey, err := k.ClientCertificate("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return err
	}
	files["kubelet-client.crt"], files["kubelet-client.key"] = kcCrt, kcKey
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	files["sa.key"] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER})
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(k.dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (k *Kube) sign(subject pkix.Name, ips []net.IP, usage x509.ExtKeyUsage, dns ...string) (crt, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: n, Subject: subject, IPAddresses: ips, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, k.caCert, &key.PublicKey, k.caKey)
	if err != nil {
		return nil, nil, err
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// NodeClaimCRD is the path of Karpenter's NodeClaim CRD (karpenter.sh/v1) that `make deps` copies
// from the sigs.k8s.io/karpenter module; missing, the test skips (fails under CI).
func NodeClaimCRD(t testing.TB) string {
	t.Helper()
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, ".tools", "kube", "crds", "karpenter.sh_nodeclaims.yaml")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := "no Karpenter NodeClaim CRD in .tools/kube/crds: run `make deps`"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// InstallCRD creates (or leaves alone, when there) the CustomResourceDefinition in the YAML file
// and waits until the API server serves it.
func (k *Kube) InstallCRD(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(b, &obj.Object); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dyn, err := dynamic.NewForConfig(k.Admin)
	if err != nil {
		return err
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, &obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("install %s: %w", obj.GetName(), err)
	}
	err = clock.Until(ctx, clock.Wall{}, 50*time.Millisecond, func() bool {
		got, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", obj.GetName(), err)
	}
	return nil
}

// KubeOnce is a control plane a test package starts for its first test that needs one and
// stops in its TestMain (Stop), for packages whose TestMain does more than KubeMain.
type KubeOnce struct {
	once sync.Once
	k    *Kube
	err  error
}

// Get starts the control plane the first time (skipping the test without the binaries, failing
// it under CI) and returns it.
func (o *KubeOnce) Get(t testing.TB) *Kube {
	t.Helper()
	etcd, api := Binary(t, "etcd", "RB_ETCD_BIN"), Binary(t, "kube-apiserver", "RB_KUBE_APISERVER_BIN")
	o.once.Do(func() { o.k, o.err = RunKube(etcd, api) })
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.k
}

// Stop stops the control plane, if one was started.
func (o *KubeOnce) Stop() {
	if o.k != nil {
		o.k.Stop()
	}
}

// Apply creates the objects (ServiceAccounts, RBAC objects, Secrets, Services, Namespaces and
// Deployments), as `kubectl create` would; one that exists already is left alone.
func (k *Kube) Apply(ctx context.Context, objs []runtime.Object) error {
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			_, err = k.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = k.Client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = k.Client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = k.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = k.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = k.Client.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = k.Client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Namespace:
			_, err = k.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			_, err = k.Client.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("Apply does not know %T", o)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("apply: %w", err)
		}
	}
	return nil
}

// StartControllers starts kube-controller-manager (the Deployment and ReplicaSet controllers
// only) and kube-scheduler against the control plane, for tests of workloads a controller owns
// (the server's Deployment); they stop with the control plane. Without their binaries the test
// skips (fails under CI).
func (k *Kube) StartControllers(t testing.TB) {
	t.Helper()
	kcm, sched := Binary(t, "kube-controller-manager", "RB_KUBE_CONTROLLER_MANAGER_BIN"), Binary(t, "kube-scheduler", "RB_KUBE_SCHEDULER_BIN")
	k.controllers.Do(func() { k.controllersErr = k.startControllers(kcm, sched) })
	if k.controllersErr != nil {
		t.Fatal(k.controllersErr)
	}
}

func (k *Kube) startControllers(kcm, sched string) error {
	kubeconfig, err := k.Kubeconfig(k.dir, k.Admin, "default")
	if err != nil {
		return err
	}
	c, err := k.start("kube-controller-manager", kcm, "--kubeconfig", kubeconfig, "--controllers", "deployment-controller,replicaset-controller",
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port", "0", "--v", "0")
	if err != nil {
		return err
	}
	s, err := k.start("kube-scheduler", sched, "--kubeconfig", kubeconfig, "--leader-elect=false", "--secure-port", "0", "--v", "0")
	if err != nil {
		return err
	}
	k.extra = append(k.extra, c, s)
	return nil
}

// Decode reads a YAML stream of Kubernetes objects (a manifest file) into typed objects.
func Decode(manifest []byte) ([]runtime.Object, error) {
	var objs []runtime.Object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if onlyComments(doc) {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
}

func onlyComments(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' && !bytes.Equal(l, []byte("---")) {
			return false
		}
	}
	return true
}
