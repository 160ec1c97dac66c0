package pod_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
	"github.com/etcdfed/etcdfed/spoke/component/pod"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// everything is a member with every option that renders a flag.
func everything(version string) *etcdfedv1.EtcdMember {
	return member(func(m *etcdfedv1.EtcdMember) {
		m.Spec.Version = version
		m.Spec.ForceNewCluster = "1"
		m.Spec.TLS.PeerSkipClientSANVerification = true
		m.Spec.Etcd = etcdfedv1.EtcdConfig{
			HeartbeatIntervalMillis: ptr.To[int32](250),
			ElectionTimeoutMillis:   ptr.To[int32](2500),
			QuotaBackendBytes:       ptr.To(resource.MustParse("8Gi")),
			AutoCompactionMode:      etcdfedv1.AutoCompactionPeriodic,
			AutoCompactionRetention: "1h",
		}
	})
}

// The flags each etcd line takes: no removed --experimental-* name ever
// reaches 3.7, the graduated names from 3.6 on, 3.5's own spelling.
func TestEtcdArgsPerVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    []string
		without []string
	}{
		{"3.5.35", []string{"--experimental-peer-skip-client-san-verification=true"}, []string{"--max-learners", "--peer-skip-client-san-verification=true"}},
		{"3.6.16", []string{"--max-learners=1", "--peer-skip-client-san-verification=true"}, []string{"--experimental-"}},
		{"3.7.3", []string{"--max-learners=1", "--peer-skip-client-san-verification=true"}, []string{"--experimental-"}},
		// An empty version is the newest line's (the policy's default).
		{"", []string{"--max-learners=1", "--peer-skip-client-san-verification=true"}, []string{"--experimental-"}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			got := pod.EtcdArgs(everything(tc.version), spec.PodPorts)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("missing %s in\n%s", w, strings.Join(got, "\n"))
				}
			}
			for _, wo := range tc.without {
				for _, a := range got {
					if strings.HasPrefix(a, wo) {
						t.Errorf("%s rendered for %q:\n%s", a, tc.version, strings.Join(got, "\n"))
					}
				}
			}
			if v := spec.EtcdVersion(everything(tc.version)); v.Minor >= 7 {
				for _, a := range got {
					name := strings.SplitN(strings.TrimPrefix(a, "--"), "=", 2)[0]
					if slices.Contains(etcdversion.RemovedIn37, name) {
						t.Errorf("%s is removed in etcd 3.7", a)
					}
				}
			}
		})
	}
}

// The real binaries take the rendered flags: each etcd the local
// environment builds (bin/etcd-3.5.x, bin/etcd, bin/etcd-3.7.x) parses
// every flag rendered for its version and exits at --version, which etcd
// handles after parsing (an unknown flag exits 2 before). Nothing starts.
func TestEtcdBinariesTakeTheRenderedFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the etcd binaries of bin/ (-short)")
	}
	dir, err := testenv.BinDir()
	if err != nil {
		t.Skip(err)
	}
	for _, l := range etcdversion.Lines() {
		v := l.Newest.String()
		t.Run(v, func(t *testing.T) {
			bin := filepath.Join(dir, "etcd-"+v)
			if _, err := os.Stat(bin); err != nil {
				bin = filepath.Join(dir, "etcd")
				out, err := exec.Command(bin, "--version").Output()
				if err != nil || !strings.Contains(string(out), "etcd Version: "+v) {
					t.Skipf("no etcd %s in %s (hack/tools.sh builds it)", v, dir)
				}
			}
			args := pod.EtcdArgs(everything(v), spec.PodPorts)
			for i, a := range args {
				args[i] = strings.ReplaceAll(a, "$("+pod.EnvPodIP+")", "127.0.0.1")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, append(args, "--version")...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "etcd Version: "+v) {
				t.Errorf("etcd %s refused the flags rendered for it (%v):\n%s\nflags:\n%s", v, err, out, strings.Join(args, "\n"))
			}
		})
	}
}
