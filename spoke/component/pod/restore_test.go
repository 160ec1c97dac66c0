package pod_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// A founding member of a restored cluster prepares its data (after the
// DNS wait, before etcd) on the data volume, with the store credentials
// Secret mounted and the member's own bootstrap flags; the switch of
// bootstrap to existing and the cluster ID the hub adds once the cluster
// formed replace nothing; a member with neither a restore nor a cluster ID
// has no such container.
func TestRestoreInitContainer(t *testing.T) {
	params := pod.Params{HelperImage: "ghcr.io/etcdfed/etcdfed-init:v0.1.0", ClaimName: "main-0-data-2", Advertised: spec.PodPorts}
	sha := strings.Repeat("ab", 32)
	restored := member(func(m *etcdfedv1.EtcdMember) {
		m.Spec.Bootstrap.Restore = &etcdfedv1.MemberRestore{
			Store:  etcdfedv1.BackupStore{URL: "s3://backups/hub", S3: &etcdfedv1.S3StoreOptions{Endpoint: "http://s3.example.com"}, CredentialsSecretName: "main-0-store"},
			Object: "team-a/main/8e9e05c52164694d/20261123T120000.000Z-rev1234.db", SHA256: sha, RevisionBump: etcdfedv1.DefaultRestoreRevisionBump,
		}
	})
	p := pod.Build(restored, params)
	var names []string
	for _, c := range p.Spec.InitContainers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{pod.ContainerWaitDNS, pod.ContainerInstallHelper, pod.ContainerPrepareData}) {
		t.Fatalf("init containers %v, want wait-dns, install-helper then prepare-data", names)
	}
	c := p.Spec.InitContainers[2]
	if c.Image != params.HelperImage || c.Command[0] != "etcdfed-init" || c.Command[1] != "prepare-data" {
		t.Errorf("restore container runs %s %v", c.Image, c.Command)
	}
	for _, want := range []string{
		"--store-url=s3://backups/hub", "--s3-endpoint=http://s3.example.com", "--sha256=" + sha,
		"--object=team-a/main/8e9e05c52164694d/20261123T120000.000Z-rev1234.db",
		"--name=main-0", "--peer-url=https://main-0.etcd.example.com:2380",
		"--initial-cluster=" + restored.Spec.Bootstrap.InitialCluster, "--initial-cluster-token=main-uid-1",
		"--data-dir=" + pod.DataDir, "--bump-revision=1000000000", "--credentials-dir=" + pod.StoreCredentialsMountPath,
	} {
		if !slices.Contains(c.Command, want) {
			t.Errorf("restore command %v lacks %s", c.Command, want)
		}
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("termination message policy %q: a failed restore must say why", c.TerminationMessagePolicy)
	}
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm.MountPath
	}
	if mounts[pod.VolumeData] != pod.DataMountPath || mounts[pod.VolumeStoreCredentials] != pod.StoreCredentialsMountPath {
		t.Errorf("restore mounts %v", mounts)
	}
	i := slices.IndexFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == pod.VolumeStoreCredentials })
	if i < 0 || p.Spec.Volumes[i].Secret == nil || p.Spec.Volumes[i].Secret.SecretName != "main-0-store" {
		t.Errorf("no credentials volume from Secret main-0-store in %v", p.Spec.Volumes)
	}

	// Once formed, the hub switches bootstrap to existing: nothing restarts.
	formed := restored.DeepCopy()
	formed.Spec.Bootstrap.InitialClusterState = etcdfedv1.InitialClusterExisting
	formed.Spec.Bootstrap.ClusterID = "8e9e05c52164694d"
	p.Status.Phase = corev1.PodRunning
	if d := pod.Decide(formed, p, pod.Build(formed, params), nil); d.Action != pod.Keep {
		t.Errorf("bootstrap switched to existing with its cluster ID: %s (%s), want Keep", d.Action, d.Message)
	}
	fp := pod.Build(formed, params)
	if !slices.Contains(fp.Spec.InitContainers[2].Command, "--cluster-id=8e9e05c52164694d") {
		t.Errorf("formed member's prepare-data %v does not check the cluster ID", fp.Spec.InitContainers[2].Command)
	}

	plain := pod.Build(member(), params)
	if slices.ContainsFunc(plain.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == pod.ContainerPrepareData }) {
		t.Error("a member without spec.bootstrap.restore or clusterID prepares its data")
	}
	checked := pod.Build(member(func(m *etcdfedv1.EtcdMember) { m.Spec.Bootstrap.ClusterID = "c1" }), params)
	cc := checked.Spec.InitContainers[len(checked.Spec.InitContainers)-1]
	if cc.Name != pod.ContainerPrepareData || !slices.Equal(cc.Command, []string{"etcdfed-init", "prepare-data", "--data-dir=" + pod.DataDir, "--cluster-id=c1"}) || len(cc.VolumeMounts) != 1 {
		t.Errorf("a formed member's data check: %s %v mounts %v", cc.Name, cc.Command, cc.VolumeMounts)
	}
	file := member(func(m *etcdfedv1.EtcdMember) {
		m.Spec.Bootstrap.Restore = &etcdfedv1.MemberRestore{Store: etcdfedv1.BackupStore{URL: "file:///backups"}, Object: "a.db", SHA256: sha, RevisionBump: 1}
	})
	fp = pod.Build(file, params)
	if len(fp.Spec.InitContainers[2].VolumeMounts) != 1 || slices.ContainsFunc(fp.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == pod.VolumeStoreCredentials }) {
		t.Errorf("a store without credentials mounts %v, volumes %v", fp.Spec.InitContainers[2].VolumeMounts, fp.Spec.Volumes)
	}
}
