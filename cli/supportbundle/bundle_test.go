package supportbundle_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/cli/supportbundle"
	"github.com/etcdfed/etcdfed/dev/installtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// TestBundleHoldsNoSecret: a bundle of a ring whose hub and member cluster
// hold a CA key, the hub's client key, member keys, backup credentials,
// the hub's token and the gossip key (and whose events and logs leak some
// of them) holds the ring's objects, and none of those values, in any
// form.
func TestBundleHoldsNoSecret(t *testing.T) {
	ctx := context.Background()
	hub, member := installtest.HubAndMember(t, nil)

	ca, err := pki.NewCA("main", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hubLeaf, err := ca.IssueClient("etcdfed-hub", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	memberLeaf, err := ca.IssueMember(pki.MemberRequest{Member: "main-0", DNSNames: []string{"main-0.etcd.test"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "default"},
		Spec:       etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: "etcd.test"}},
	}
	must(t, hub.Client.Create(ctx, ec))
	ec.Status.Members = []etcdfedv1.MemberStatus{{Name: "main-0", Cluster: "member-1", Zone: "zone-1"}}
	ec.Status.Endpoints = []string{"https://127.0.0.1:1"}
	must(t, hub.Client.Status().Update(ctx, ec))
	secret := func(c client.Client, ns, name string, labels map[string]string, data map[string][]byte) {
		must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: data}))
	}
	secret(hub.Client, "default", pki.CASecretName(ec), nil, map[string][]byte{pki.KeyCert: ca.CertPEM, pki.KeyKey: ca.KeyPEM})
	secret(hub.Client, "default", pki.HubClientSecretName(ec), nil, map[string][]byte{pki.KeyCA: ca.CertPEM, pki.KeyCert: hubLeaf.CertPEM, pki.KeyKey: hubLeaf.KeyPEM})
	secret(hub.Client, "default", "backup-s3", nil, map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIAEXAMPLEKEYID1234"), "AWS_SECRET_ACCESS_KEY": []byte("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")})
	uid := map[string]string{etcdfedv1.LabelClusterUID: string(ec.UID), etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue}
	secret(member.Client, install.Namespace, pki.MemberSecretName("main-0"), uid, map[string][]byte{pki.KeyCA: ca.CertPEM, pki.KeyCert: memberLeaf.CertPEM, pki.KeyKey: memberLeaf.KeyPEM})
	must(t, member.Client.Create(ctx, &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "main-0", Namespace: install.Namespace, Labels: uid},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster: etcdfedv1.ClusterReference{Name: "main", Namespace: "default", UID: string(ec.UID)}, MemberName: "main-0", Incarnation: 1,
			Image: "etcd:v3.6.16", DNSName: "main-0.etcd.test", Expose: etcdfedv1.ExposeSpec{Type: etcdfedv1.ExposeNodePort}, TLS: etcdfedv1.MemberTLS{Mode: etcdfedv1.TLSDisabled},
		},
	}))
	must(t, member.Client.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "spoke", Namespace: install.Namespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("spoke-0"), RenewTime: &metav1.MicroTime{Time: time.Now()}}}))

	// Every secret value there is, in the hub and the member cluster.
	var values [][]byte
	for _, c := range []client.Client{hub.Client, member.Client} {
		var list corev1.SecretList
		must(t, c.List(ctx, &list))
		for _, s := range list.Items {
			for k, v := range s.Data {
				if len(v) >= 16 && k != "ca.crt" && k != pki.KeyCert && k != "kubeconfig" {
					values = append(values, v)
				}
			}
		}
	}
	reg := &corev1.Secret{}
	must(t, hub.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "member-1"}, reg))
	token := string(reg.Data["token"])
	if token == "" || len(values) < 8 {
		t.Fatalf("set-up: token %q, %d secret values", token, len(values))
	}
	// Leaks the bundle must catch: an event quoting the token, a log
	// quoting the backup key, the gossip key in base64, a private key.
	must(t, hub.Client.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "main.leak", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "EtcdCluster", Name: "main", Namespace: "default", APIVersion: "etcdfed.dev/v1alpha1"},
		Reason:         "Test", Message: "request with Authorization: Bearer " + token, Type: "Normal",
	}))
	gossip := &corev1.Secret{}
	must(t, hub.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: install.GossipSecret}, gossip))
	logFile := filepath.Join(t.TempDir(), "hub.log")
	must(t, os.WriteFile(logFile, []byte(strings.Join([]string{
		"12:00:00 INFO Starting hub",
		"12:00:01 DEBUG s3 client key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"12:00:02 DEBUG gossip key " + base64.StdEncoding.EncodeToString(gossip.Data["key"]),
		string(memberLeaf.KeyPEM),
		"12:00:03 INFO token " + token,
	}, "\n")), 0o600))

	var buf bytes.Buffer
	sum, err := supportbundle.Collect(ctx, supportbundle.Options{
		Hub: hub.Config, Namespace: "default", Name: "main",
		Members:  map[string]*rest.Config{"member-1": member.Config},
		LogFiles: []string{logFile}, Timeout: 2 * time.Second,
	}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bundle: %d files, %d bytes; not collected: %v", sum.Files, sum.Bytes, sum.Errors)
	files, err := supportbundle.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}

	for _, want := range []string{"hub/etcdcluster.yaml", "hub/events.yaml", "hub/secrets-default.yaml", "members/member-1/etcdmembers.yaml",
		"members/member-1/leases.yaml", "members/member-1/secrets.yaml", "etcd/endpoint-status.json", "logs/hub.log", "errors.txt", "README.txt"} {
		if _, ok := files[want]; !ok {
			t.Errorf("no %s in the bundle", want)
		}
	}
	if !strings.Contains(files["members/member-1/etcdmembers.yaml"], "main-0.etcd.test") {
		t.Error("the member cluster's EtcdMember is not in the bundle")
	}
	if !strings.Contains(files["hub/secrets-default.yaml"], "AWS_SECRET_ACCESS_KEY: <redacted, 40 bytes>") {
		t.Errorf("Secrets not listed by key and size:\n%s", files["hub/secrets-default.yaml"])
	}
	if !strings.Contains(files["etcd/endpoint-status.json"], `"error"`) {
		t.Error("the unreachable endpoint's error is not recorded")
	}
	if !strings.Contains(files["logs/hub.log"], "Starting hub") || !strings.Contains(files["hub/events.yaml"], "<token redacted>") {
		t.Error("the log or the event is missing")
	}
	for name, content := range files {
		if strings.Contains(content, "PRIVATE KEY-----\n") || strings.Contains(content, "BEGIN EC PRIVATE KEY") {
			t.Errorf("%s holds a private key", name)
		}
		for _, v := range values {
			for _, form := range []string{string(v), base64.StdEncoding.EncodeToString(v)} {
				if strings.Contains(content, form) {
					t.Errorf("%s holds a secret value (%.12q...)", name, form)
				}
			}
			for _, line := range strings.Split(string(v), "\n") {
				if line = strings.TrimSpace(line); len(line) >= 40 && !strings.HasPrefix(line, "-----") && strings.Contains(content, line) {
					t.Errorf("%s holds a line of a secret value (%.12q...)", name, line)
				}
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
