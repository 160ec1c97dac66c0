package multicluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/cli/supportbundle"
	"github.com/etcdfed/etcdfed/config/monitoring"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// labelled is what an install left in a cluster under the label key
// (=value when value is not empty), by "Kind ns/name", with
// resourceVersions.
func labelled(ctx context.Context, c client.Client, key, value string) (map[string]string, error) {
	req, err := labels.NewRequirement(key, selection.Exists, nil)
	if value != "" {
		req, err = labels.NewRequirement(key, selection.Equals, []string{value})
	}
	if err != nil {
		return nil, err
	}
	return install.Inventory(ctx, c, labels.NewSelector().Add(*req))
}

// TestScenarioInstall: three fresh member apiservers and a hub, installed
// the way a user installs real clusters: `etcdfed hub install` and
// `etcdfed cluster join` for each member cluster (the local environment
// runs them on start, with the hub and the spokes as local processes). The
// hub reports every cluster engaged and its spoke alive on the
// registrations; a ring forms over the three; `etcdfed hub install` and
// `etcdfed cluster join` run again (the CLI) change no object; the live
// hub exports every metric the shipped alerts and dashboard use, with the
// labels their tests give them; a support bundle of the live ring holds
// etcd's own view; unjoin is refused while a cluster hosts members; with
// the ring deleted and the spokes stopped, `etcdfed cluster unjoin` leaves
// nothing labelled behind in any cluster.
func TestScenarioInstall(t *testing.T) {
	if os.Getenv("ETCDFED_SCENARIOS") != "1" {
		t.Skip("a long scenario (about 4 minutes, its own local environment): run it with make scenarios (ETCDFED_SCENARIOS=1)")
	}
	testenv.SkipIfShort(t, "the local environment with the hub and spokes")
	ctx := context.Background()
	bin, err := freshBin()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	verbose := os.Getenv("MULTICLUSTER_LOG") != ""
	start := time.Now()
	env, err := startLocalEnv(ctx, localenv.Config{
		StateDir: state, Clusters: 3, ZonesPerCluster: 1, BinDir: bin,
		BackoffBase: time.Second, BackoffMax: 5 * time.Second,
		Progress: func(ev localenv.Event) { t.Log(ev.String()) },
		Log: funcr.New(func(prefix, args string) {
			if verbose {
				fmt.Fprintln(os.Stderr, prefix, args)
			}
		}, funcr.Options{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("logs kept in %s", filepath.Join(state, "logs"))
		}
	})
	t.Logf("environment installed with etcdfed hub install and etcdfed cluster join, ready in %.1fs", time.Since(start).Seconds())
	topo, err := LocalTopology(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := env.State()
	hubKC := env.Kubeconfig(localenv.HubClusterName)
	etcdfed := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "etcdfed"), args...)
		cmd.Env = append(os.Environ(), "ETCDFED_DNS_SERVERS="+strings.Join(st.DNSServers(), ","))
		out, err := cmd.CombinedOutput()
		t.Logf("etcdfed %s:\n%s", strings.Join(args, " "), out)
		return string(out), err
	}

	// The hub reports every registration engaged with its spoke alive.
	waitUntil(t, 2*time.Minute, "the hub to report every member cluster engaged with its spoke alive", func() (bool, string) {
		cs, err := install.List(ctx, topo.Hub.REST)
		if err != nil {
			return false, err.Error()
		}
		var not []string
		for _, c := range cs {
			if !c.Reported || !c.Status.Engaged || c.Status.Spoke != "Alive" || c.Expires.IsZero() {
				not = append(not, fmt.Sprintf("%s (%+v)", c.Name, c.Status))
			}
		}
		return len(cs) == 3 && len(not) == 0, fmt.Sprintf("%d registered; not yet: %v", len(cs), not)
	})
	if out, err := etcdfed("cluster", "list", "--kubeconfig", hubKC); err != nil || !strings.Contains(out, "member-3") {
		t.Fatalf("cluster list: %v", err)
	}

	// A ring over the three, with a backup schedule and a consumer, so
	// that every series the alerts use exists.
	store := "file://" + filepath.Join(state, "backups")
	etcd := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "install", Name: "main", Domain: "main.install.test", Replicas: 3, WantZones: "1/1/1",
		Spec: func(s *etcdfedv1.EtcdClusterSpec) {
			s.Backup = &etcdfedv1.BackupSpec{Schedule: "0 */6 * * *", Store: etcdfedv1.BackupStore{URL: store}}
			s.Clients = []etcdfedv1.ClientSpec{{Name: "orders-api"}}
		}})

	// Install and join again with the CLI: nothing changes anywhere.
	before := map[string]map[string]string{}
	after := map[string]map[string]string{}
	snapshot := func(into map[string]map[string]string) {
		for _, c := range st.Clusters() {
			cl := hubOrMember(topo, c.Name).Client
			into[c.Name] = map[string]string{}
			for _, key := range []string{install.LabelJoinedAs, install.LabelHubInstall} {
				m, err := labelled(ctx, cl, key, "")
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range m {
					into[c.Name][k] = v
				}
			}
		}
	}
	snapshot(before)
	if _, err := etcdfed("hub", "install", "--kubeconfig", hubKC, "--hub", "external"); err != nil {
		t.Fatalf("hub install again: %v", err)
	}
	for _, c := range st.MemberClusters {
		if _, err := etcdfed("cluster", "join", c.Name, "--kubeconfig", hubKC, "--kubeconfig-member", env.Kubeconfig(c.Name), "--spoke", "external", "--timeout", "2m"); err != nil {
			t.Fatalf("join %s again: %v", c.Name, err)
		}
	}
	snapshot(after)
	total := 0
	for cluster, objs := range before {
		total += len(objs)
		if len(objs) == 0 {
			t.Errorf("%s: nothing labelled by the install", cluster)
		}
		for k, rv := range objs {
			if after[cluster][k] != rv {
				t.Errorf("%s: %s changed when install and join ran again (resourceVersion %s -> %s)", cluster, k, rv, after[cluster][k])
			}
		}
		for k := range after[cluster] {
			if _, ok := objs[k]; !ok {
				t.Errorf("%s: %s appeared when install and join ran again", cluster, k)
			}
		}
	}
	t.Logf("hub install and 3 joins run again: %d objects in 4 clusters, none written", total)

	// The live hub exports every metric the alerts and the dashboard use,
	// with every label their tests give them.
	t.Run("the live hub exports what the alerts use", func(t *testing.T) {
		LiveHubMetricsSpec(ctx, t, topo.HubMetricsURL)
	})

	// A support bundle of the live ring.
	t.Run("support bundle", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "bundle.tar.gz")
		args := []string{"support-bundle", "main", "-n", "install", "--kubeconfig", hubKC, "-o", out, "--log-file", filepath.Join(state, "logs", "hub.log")}
		for _, c := range st.MemberClusters {
			args = append(args, "--member-kubeconfig", c.Name+"="+env.Kubeconfig(c.Name))
		}
		if _, err := etcdfed(args...); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files, err := supportbundle.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		status := files["etcd/endpoint-status.json"]
		if strings.Count(status, `"version": "3.6.16"`) != 3 || strings.Contains(status, `"error"`) {
			t.Errorf("etcd endpoint status in the bundle:\n%s", status)
		}
		for _, want := range []string{"members/member-1/etcdmembers.yaml", "members/member-1/etcd/pods.yaml", "members/member-1/etcd/logs/" + etcd.ObjectName("main-0") + "_etcd.log", "hub/events.yaml", "logs/hub.log"} {
			if _, ok := files[want]; !ok {
				t.Errorf("no %s in the bundle", want)
			}
		}
	})

	// Unjoin refuses while the cluster hosts members, and says what to do.
	out, err := etcdfed("cluster", "unjoin", "member-1", "--kubeconfig", hubKC, "--kubeconfig-member", env.Kubeconfig("member-1"))
	if err == nil || !strings.Contains(out, "hosts install/main") || !strings.Contains(out, "cordonedClusters") {
		t.Fatalf("unjoin of a cluster hosting members: %v, want refused with the cordon to do", err)
	}

	// The ring deleted and the spokes (processes: --spoke external)
	// stopped, unjoin leaves nothing labelled.
	DeleteEtcdClusterSpec(ctx, t, topo, etcd)
	for _, c := range st.MemberClusters {
		if err := env.StopComponent("spoke-"+c.Name, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := etcdfed("cluster", "unjoin", c.Name, "--kubeconfig", hubKC, "--kubeconfig-member", env.Kubeconfig(c.Name)); err != nil {
			t.Fatalf("unjoin %s: %v", c.Name, err)
		}
		left, err := labelled(ctx, hubOrMember(topo, c.Name).Client, install.LabelJoinedAs, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("%s: unjoin left %v", c.Name, keysOf(left))
		}
		// The CRDs went too (nothing of etcdfed was left in the cluster);
		// the apiserver stops serving them within moments.
		waitUntil(t, time.Minute, c.Name+": the etcdfed API gone", func() (bool, string) {
			err := hubOrMember(topo, c.Name).Client.List(ctx, &etcdfedv1.EtcdSpokeList{})
			return err != nil, "EtcdSpokes still served"
		})
	}
	left, err := labelled(ctx, topo.Hub.Client, install.LabelJoinedAs, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("hub: unjoin left %v", keysOf(left))
	}
}

// LiveHubMetricsSpec scrapes a running hub and checks that it exports
// every metric name the shipped alerts and dashboard use, and, for every
// input series of the alerts' promtool tests, that metric with every label
// name the test gives it (job and instance come from the scrape).
func LiveHubMetricsSpec(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	want, err := monitoring.RuleMetrics()
	if err != nil {
		t.Fatal(err)
	}
	series, err := monitoring.TestSeries()
	if err != nil {
		t.Fatal(err)
	}
	labelsOf := map[string][]string{}
	for _, s := range series {
		labelsOf[s.Name] = append(labelsOf[s.Name], s.Labels...)
	}
	var missing []string
	waitUntil(t, 3*time.Minute, "the hub to export every metric the alerts use", func() (bool, string) {
		m, err := scrape(ctx, url)
		if err != nil {
			return false, err.Error()
		}
		missing = missing[:0]
		for n, alerts := range want {
			if !m.has(n) {
				missing = append(missing, fmt.Sprintf("%s (%s)", n, strings.Join(alerts, ",")))
			}
		}
		for n, ls := range labelsOf {
			if !m.has(n) {
				missing = append(missing, n+" (a rule test's input)")
				continue
			}
			for _, l := range ls {
				if !slices.ContainsFunc(m[n], func(s metricSample) bool { _, ok := s.labels[l]; return ok }) {
					missing = append(missing, n+" with label "+l)
				}
			}
		}
		sort.Strings(missing)
		return len(missing) == 0, fmt.Sprintf("missing %v", missing)
	})
	t.Logf("the live hub exports all %d metrics the alerts use, and the labels of the %d series their tests feed", len(want), len(labelsOf))
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// waitUntil polls cond until it says done, failing the test after timeout
// with its last explanation.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	err := poll(context.Background(), timeout, what, func(context.Context) (string, error) {
		done, why := cond()
		if done {
			return "", nil
		}
		if why == "" {
			why = "not yet"
		}
		return why, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hubOrMember is the hub (named localenv.HubClusterName) or a member
// cluster of topo.
func hubOrMember(topo *Topology, name string) *Cluster {
	if name == localenv.HubClusterName {
		return topo.Hub
	}
	return clusterNamed(topo, name)
}
