package multicluster

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/addr"
)

// TestScenarioSpokeRestartDNS: member-1's spoke runs two replicas with
// leader election (a second spoke process on the cluster's next
// infrastructure address, as the Deployment's second pod); a DNS query
// load asks both replicas' addresses for the ring's names, as the
// cluster's resolvers do, while the spoke is rolled (each replica
// restarted, the next once the first is ready again) and the leader is
// killed: 0 failed answers, the recorded workload linearizable with
// nothing lost.
//
// ETCDFED_SPOKE_DNS_REPLICAS=1 runs the same with one replica and no
// election (the layout before the spoke had two): it fails, every restart
// leaves the cluster's DNS without an answer.
func TestScenarioSpokeRestartDNS(t *testing.T) {
	ringScenario(t, ringScenarioInput{What: "spoke rolled and killed under a DNS query load", Ring: EtcdClusterSpecInput{Namespace: "spoke-dns", Name: "sdns", Domain: "sdns.etcd.test", Replicas: 3, WantZones: "1/1/1"}}, func(ctx context.Context, topo *Topology, etcd *ManagedEtcd) {
		env := hubFx.env
		c := env.State().MemberClusters[0]
		spokeA := "spoke-" + c.Name
		argsA, err := env.ComponentArgs(spokeA)
		if err != nil {
			t.Fatal(err)
		}
		envA, err := env.ComponentEnv(spokeA)
		if err != nil {
			t.Fatal(err)
		}
		agent := netip.MustParseAddr(c.AgentAddress)
		b4 := agent.As4()
		b4[3]++
		agentB := netip.AddrFrom4(b4).String()
		dnsA := c.DNS
		dnsB := netip.AddrPortFrom(netip.AddrFrom4(b4), addr.DNSPort).String()
		healthA := "http://" + c.Health + "/readyz"
		healthB := "http://" + netip.AddrPortFrom(netip.AddrFrom4(b4), addr.AgentHealthPort).String() + "/readyz"

		replicas := 2
		if os.Getenv("ETCDFED_SPOKE_DNS_REPLICAS") == "1" {
			replicas = 1
		}
		servers := []string{dnsA}
		names := []string{spokeA}
		health := map[string]string{spokeA: healthA}
		args := map[string][]string{spokeA: argsA}
		if replicas == 2 {
			servers = append(servers, dnsB)
			spokeB := spokeA + "-b"
			names = append(names, spokeB)
			health[spokeB] = healthB
			both := []string{"--leader-elect=true", "--dns-advertise-address=" + dnsA + "," + dnsB}
			args[spokeA] = append(slices.Clone(argsA), append(both, "--identity="+spokeA)...)
			args[spokeB] = append(slices.Clone(argsA), append(both, "--identity="+spokeB,
				"--dns-listen="+dnsB, "--gossip-bind="+agentB+":7946",
				"--metrics-bind-address="+agentB+":8080", "--health-probe-bind-address="+agentB+":8081")...)
			if err := env.RestartComponentWith(spokeA, args[spokeA], 5*time.Second); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = env.StopComponent(spokeB, 5*time.Second)
				_ = env.RestartComponentWith(spokeA, argsA, 5*time.Second)
			})
			if err := env.AddComponent(localenv.ComponentSpec{Name: spokeB, Path: filepath.Join(hubFx.bin, "spoke"), Cluster: c.Name, Args: args[spokeB], Env: envA}); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range names {
			if err := waitReady(ctx, health[n], time.Minute); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
		}
		member := topo.Members[0]
		leader := func(ctx context.Context) string {
			if replicas == 1 {
				return spokeA
			}
			// The liveness Lease, which only the leader renews, under the
			// replica's --identity (the election Lease's holder is the
			// host name and a random suffix).
			l := &coordinationv1.Lease{}
			if err := member.Client.Get(ctx, client.ObjectKey{Namespace: localenv.RingNamespace, Name: etcdfedv1.SpokeObjectName}, l); err != nil || l.Spec.HolderIdentity == nil {
				return ""
			}
			return *l.Spec.HolderIdentity
		}
		if err := poll(ctx, time.Minute, "a spoke replica leads", func(ctx context.Context) (string, error) {
			if l := leader(ctx); !slices.Contains(names, l) {
				return "Lease holder " + l, nil
			}
			return "", nil
		}); err != nil {
			t.Fatal(err)
		}
		SpokeRestartDNSSpec(ctx, SpokeRestartDNSSpecInput{T: t, Topology: topo, Etcd: etcd, Servers: servers,
			Rollout: func(ctx context.Context) error {
				// The standby first, the leader last, as a rollout that
				// replaces the old pods in turn.
				order := slices.Clone(names)
				if l := leader(ctx); len(order) == 2 && order[0] == l {
					order[0], order[1] = order[1], order[0]
				}
				t.Logf("rolling %v (the leader last)", order)
				for _, n := range order {
					if err := env.RestartComponentWith(n, args[n], 5*time.Second); err != nil {
						return err
					}
					if err := waitReady(ctx, health[n], time.Minute); err != nil {
						return fmt.Errorf("%s: %w", n, err)
					}
				}
				return nil
			},
			Kill: func(ctx context.Context) error {
				// The leader as of now: the holder of a renewal made after
				// this step began (the rollout may just have moved the
				// Lease).
				since := time.Now()
				var l string
				if err := poll(ctx, time.Minute, "a renewal of the liveness Lease", func(ctx context.Context) (string, error) {
					if replicas == 1 {
						l = spokeA
						return "", nil
					}
					lease := &coordinationv1.Lease{}
					if err := member.Client.Get(ctx, client.ObjectKey{Namespace: localenv.RingNamespace, Name: etcdfedv1.SpokeObjectName}, lease); err != nil {
						return "", err
					}
					if lease.Spec.RenewTime == nil || lease.Spec.HolderIdentity == nil || !lease.Spec.RenewTime.After(since) || !slices.Contains(names, *lease.Spec.HolderIdentity) {
						return "no renewal since the step began", nil
					}
					l = *lease.Spec.HolderIdentity
					return "", nil
				}); err != nil {
					return err
				}
				t.Logf("killing %s, the leading replica", l)
				if _, err := env.KillComponent(l, false); err != nil {
					return err
				}
				sleepCtx(ctx, time.Second)
				return waitReady(ctx, health[l], 2*time.Minute)
			},
		})
	})
}

// waitReady waits until a spoke's /readyz answers 200.
func waitReady(ctx context.Context, url string, timeout time.Duration) error {
	return poll(ctx, timeout, "ready at "+url, func(ctx context.Context) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error(), nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.Status, nil
		}
		return "", nil
	})
}
