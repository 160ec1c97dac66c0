package install

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/registration"
)

// waitLoadBalancer waits for the LoadBalancer address of one of the
// spoke's Services (name), where other clusters reach what (DNS, gossip).
func waitLoadBalancer(ctx context.Context, mem client.Client, name, what string, timeout time.Duration, progress func(string)) (string, error) {
	progress(fmt.Sprintf("waiting for the LoadBalancer address of the Service %s (other clusters reach the spoke's %s there)", name, what))
	var addr string
	err := poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		svc := &corev1.Service{}
		if err := mem.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, svc); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				addr = in.IP
			} else if in.Hostname != "" {
				addr = in.Hostname
			}
		}
		return addr != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("the Service %s/%s got no LoadBalancer address within %s: the cluster may have no LoadBalancer; give --advertise-address (and --gossip-advertise-address), or --spoke-expose NodePort", Namespace, name, timeout)
	}
	if ip := net.ParseIP(addr); ip == nil && strings.Contains(addr, ":") {
		return "", fmt.Errorf("LoadBalancer address %q: not a host", addr)
	}
	return addr, nil
}

// wait waits until the spoke is rolled out and alive and the hub reports
// the cluster engaged and the spoke alive, with a line per step and one
// every 15 seconds while it waits.
func (o *JoinOptions) wait(ctx context.Context, hub, mem client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	type step struct {
		what string
		done func(ctx context.Context) (bool, string)
	}
	var firstRenew *time.Time
	steps := []step{}
	if !o.External {
		steps = append(steps, step{"the spoke rolled out", func(ctx context.Context) (bool, string) {
			return deploymentReady(ctx, mem, SpokeDeployment)
		}})
	}
	steps = append(steps,
		step{"the spoke renews its Lease", func(ctx context.Context) (bool, string) {
			t, err := spokeRenewTime(ctx, mem)
			if err != nil {
				return false, err.Error()
			}
			if firstRenew == nil {
				firstRenew = &t
				return false, "Lease " + Namespace + "/spoke renewed at " + t.UTC().Format(time.RFC3339) + "; waiting for the next renewal"
			}
			return !t.Equal(*firstRenew), ""
		}},
		step{"the hub engaged the cluster and sees its spoke", func(ctx context.Context) (bool, string) {
			sec := &corev1.Secret{}
			if err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: o.Name}, sec); err != nil {
				return false, err.Error()
			}
			s, ok := registration.StatusOf(sec.Annotations)
			if !ok {
				return false, "the hub has not reported on this registration yet: is the hub running? (kubectl -n " + Namespace + " logs deploy/" + HubDeployment + ")"
			}
			why := fmt.Sprintf("the hub reports engaged=%v, spoke %s", s.Engaged, s.Spoke)
			if s.Problem != "" {
				why += ": " + s.Problem
			}
			return s.Engaged && s.Spoke == registration.SpokeAlive, why
		}},
	)
	start := time.Now()
	for _, s := range steps {
		last := time.Now()
		var why string
		err := poll(ctx, o.Timeout, func(ctx context.Context) (bool, error) {
			var done bool
			done, why = s.done(ctx)
			if !done && time.Since(last) >= 15*time.Second {
				last = time.Now()
				o.Progress(fmt.Sprintf("%s: still waiting for %s (%s)", o.Name, s.what, why))
			}
			return done, nil
		})
		if err != nil {
			return fmt.Errorf("%s: %s did not happen within %s (%s)", o.Name, s.what, o.Timeout, why)
		}
		o.Progress(fmt.Sprintf("%s: %s (%.1fs)", o.Name, s.what, time.Since(start).Seconds()))
	}
	return nil
}

func poll(ctx context.Context, timeout time.Duration, f func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		done, err := f(ctx)
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// deploymentReady reports whether a Deployment in the ring namespace has
// rolled out its current template, and if not, what it waits for.
func deploymentReady(ctx context.Context, c client.Client, name string) (bool, string) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, d); err != nil {
		return false, err.Error()
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	if s.ObservedGeneration >= d.Generation && s.UpdatedReplicas >= want && s.AvailableReplicas >= want && s.Replicas == s.UpdatedReplicas {
		return true, ""
	}
	return false, fmt.Sprintf("Deployment %s: %d of %d updated, %d available (kubectl -n %s describe deploy/%s)", name, s.UpdatedReplicas, want, s.AvailableReplicas, Namespace, name)
}

// spokeRenewTime reads the renewTime of the spoke's liveness Lease.
func spokeRenewTime(ctx context.Context, c client.Client) (time.Time, error) {
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: etcdfedv1.SpokeObjectName}, l); err != nil {
		if apierrors.IsNotFound(err) {
			return time.Time{}, errors.New("the spoke has not created its Lease " + Namespace + "/" + etcdfedv1.SpokeObjectName + " yet")
		}
		return time.Time{}, err
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, errors.New("the spoke's Lease has no renewTime yet")
	}
	return l.Spec.RenewTime.Time, nil
}

// waitRefused waits until the member cluster no longer accepts token.
func waitRefused(ctx context.Context, c client.Client, token string, timeout time.Duration) error {
	err := poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
		if err := c.Create(ctx, tr); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		return !tr.Status.Authenticated, nil
	})
	if err != nil {
		return fmt.Errorf("the hub's token still authenticates %s after its ServiceAccount was deleted", timeout)
	}
	return nil
}

// waitNoSpokePods waits until no spoke pod runs in the ring namespace.
func waitNoSpokePods(ctx context.Context, c client.Client, timeout time.Duration) error {
	var left int
	err := poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(Namespace), client.MatchingLabels{"app.kubernetes.io/name": SpokeDeployment}); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		left = len(pods.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d spoke pods still there after %s", left, timeout)
	}
	return nil
}

// waitGossipRevoked waits until the hub's gossip identity table no longer
// names cluster, and says what happened (a warning when the hub did not
// revoke in time: unjoin goes on, and the hub revokes once it runs).
func waitGossipRevoked(ctx context.Context, hub client.Client, cluster string, timeout time.Duration) string {
	named := func(ctx context.Context) (bool, error) {
		sec := &corev1.Secret{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: GossipSecret}, sec); err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(sec.Data[etcdfedv1.GossipSecretPeers]), "\n") {
			if name, _, _ := strings.Cut(strings.TrimSpace(line), " "); name == cluster {
				return true, nil
			}
		}
		return false, nil
	}
	if ok, err := named(ctx); err != nil || !ok {
		return fmt.Sprintf("%s: no gossip identity to revoke (the hub issued none)", cluster)
	}
	err := poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		ok, err := named(ctx)
		return err == nil && !ok, nil
	})
	if err != nil {
		return fmt.Sprintf("WARNING: %s: the hub has not revoked its gossip identity after %s (is the hub running?); it does at its next pass, then rotates the gossip key", cluster, timeout)
	}
	return fmt.Sprintf("%s: the hub revoked its gossip identity; the gossip key rotation follows (kubectl -n %s get secret %s -o jsonpath='{.metadata.annotations}')", cluster, Namespace, GossipSecret)
}
