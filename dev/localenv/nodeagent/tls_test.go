package nodeagent_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
)

// An etcd pod reads its TLS files from a Secret and its CA from a
// ConfigMap at their mount paths, takes a flag from a ConfigMap key through
// $(VAR) expansion, writes its log into an emptyDir, and starts after an
// init container completed. A client with the same CA reaches it over TLS.
func TestEtcdPodWithSecretMountedTLSAndInitContainer(t *testing.T) {
	_, cs := fixture(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	g := NewWithT(t)

	// The pod IP is not known in advance: the certificate carries every
	// address of the zone's pod range.
	var ips []net.IP
	for h := addr.FirstPodHost; h <= addr.LastPodHost; h++ {
		ips = append(ips, addrFrom(fx.slot.Zone(1, 1).Addr().As4(), h).AsSlice())
	}
	caPEM, certPEM, keyPEM := testPKI(t, "etcd-tls.test", ips)
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-tls"},
		Data:       map[string][]byte{"ca.crt": caPEM, "tls.crt": certPEM, "tls.key": keyPEM},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-config"},
		Data:       map[string]string{"heartbeat": "150", "ca.crt": string(caPEM)},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	pod := etcdPod("etcd-tls", zoneA, "")
	c := &pod.Spec.Containers[0]
	c.Args = []string{
		"--name=$(POD_NAME)",
		"--data-dir=/var/lib/etcd/data",
		"--listen-client-urls=https://$(POD_IP):2379",
		"--advertise-client-urls=https://$(POD_IP):2379",
		"--listen-peer-urls=https://$(POD_IP):2380",
		"--initial-advertise-peer-urls=https://$(POD_IP):2380",
		"--initial-cluster=$(POD_NAME)=https://$(POD_IP):2380",
		"--listen-metrics-urls=http://$(POD_IP):2381",
		"--cert-file=/etc/etcd/tls/tls.crt",
		"--key-file=/etc/etcd/tls/tls.key",
		"--trusted-ca-file=/etc/etcd/ca/ca.crt",
		"--client-cert-auth",
		"--peer-cert-file=/etc/etcd/tls/tls.crt",
		"--peer-key-file=/etc/etcd/tls/tls.key",
		"--peer-trusted-ca-file=/etc/etcd/tls/ca.crt",
		"--peer-client-cert-auth",
		"--heartbeat-interval=$(HEARTBEAT)",
		"--log-outputs=/var/log/etcd/etcd.log",
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: "HEARTBEAT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "etcd-config"}, Key: "heartbeat"}}})
	mode := int32(0o600)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "etcd-tls", DefaultMode: &mode}}},
		{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "etcd-config"},
			Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}},
	}
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/var/lib/etcd"},
		{Name: "logs", MountPath: "/var/log/etcd"},
		{Name: "tls", MountPath: "/etc/etcd/tls", ReadOnly: true},
		{Name: "ca", MountPath: "/etc/etcd/ca", ReadOnly: true},
	}
	pod.Spec.InitContainers = []corev1.Container{{
		Name: "check", Image: "registry.k8s.io/etcd:3.6.16-0", Command: []string{"/usr/local/bin/etcdctl", "version"},
	}}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	var p *corev1.Pod
	g.Eventually(func(g Gomega) {
		p, err = cs.CoreV1().Pods(ns).Get(ctx, "etcd-tls", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(podReady(p)).To(BeTrue(), "status %+v", p.Status)
	}).WithTimeout(60 * time.Second).Should(Succeed())
	g.Expect(p.Status.InitContainerStatuses).To(HaveLen(1))
	initState := p.Status.InitContainerStatuses[0].State.Terminated
	g.Expect(initState).NotTo(BeNil())
	g.Expect(initState.ExitCode).To(BeZero())
	g.Expect(initState.Reason).To(Equal("Completed"))
	g.Expect(initState.FinishedAt.Time).To(BeTemporally("<=", p.Status.ContainerStatuses[0].State.Running.StartedAt.Time))
	g.Expect(p.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodInitialized), HaveField("Status", corev1.ConditionTrue))))

	pid := containerPID(g, p)
	cmdline := strings.Split(readFile("/proc/"+itoa(pid)+"/cmdline"), "\x00")
	g.Expect(cmdline).To(ContainElement("--heartbeat-interval=150"))
	podDir := filepath.Join(fx.state, "pods", ns+"_etcd-tls_"+string(p.UID), "volumes")
	g.Expect(cmdline).To(ContainElement("--cert-file=" + filepath.Join(podDir, "tls", "tls.crt")))
	fi, err := os.Stat(filepath.Join(podDir, "tls", "tls.key"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	g.Expect(filepath.Join(podDir, "logs", "etcd.log")).To(BeARegularFile())

	// A TLS client with the CA and the client certificate.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://" + p.Status.PodIP + ":2379"},
		DialTimeout: 5 * time.Second,
		TLS:         &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer cli.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cli.Put(wctx, "over", "tls")
	g.Expect(err).NotTo(HaveOccurred())
}

// testPKI returns a CA and one certificate for serving and client use.
func testPKI(t *testing.T, dnsName string, ips []net.IP) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName},
		DNSNames: []string{dnsName}, IPAddresses: ips, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
