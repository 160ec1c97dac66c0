// Package lease renews the spoke's liveness Lease (coordination.k8s.io,
// named etcdfedv1.SpokeObjectName in the ring namespace). The hub measures
// renewals on its own clock: it notes when it saw renewTime or the holder
// change (liveness.Tracker), never trusting the spoke's timestamps alone.
package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Defaults.
const (
	// DefaultRenewInterval: the hub's default --lease-stale-after (4s)
	// tolerates three missed renewals.
	DefaultRenewInterval = time.Second
	// DefaultDuration is what the Lease tells other readers; the hub judges
	// staleness on its own clock with --lease-stale-after.
	DefaultDuration = 4 * time.Second
)

var (
	renewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcdfed_spoke_lease_renewals_total",
		Help: "Renewals of the spoke's liveness Lease, by result (ok, error).",
	}, []string{"result"})
	lastRenew = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "etcdfed_spoke_lease_last_renew_timestamp_seconds",
		Help: "Unix time of the last successful renewal of the spoke's liveness Lease.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(renewals, lastRenew)
}

// Renewer renews the Lease; it is a manager.Runnable that needs leader
// election (only the acting replica of the spoke renews).
type Renewer struct {
	// Client writes the Lease; Reader reads it past any cache.
	Client client.Client
	Reader client.Reader
	// Namespace is the ring namespace.
	Namespace string
	// Holder names this spoke replica (holderIdentity).
	Holder string
	// Interval between renewals; 0: DefaultRenewInterval.
	Interval time.Duration
	// Duration is leaseDurationSeconds; 0: DefaultDuration.
	Duration time.Duration
	Log      logr.Logger

	lease *coordinationv1.Lease
	ok    bool
}

// Start renews until ctx ends.
func (r *Renewer) Start(ctx context.Context) error {
	if r.Interval == 0 {
		r.Interval = DefaultRenewInterval
	}
	if r.Duration == 0 {
		r.Duration = DefaultDuration
	}
	r.Log.Info("Renewing liveness Lease", "lease", r.Namespace+"/"+etcdfedv1.SpokeObjectName, "interval", r.Interval, "duration", r.Duration)
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		r.renewLogged(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (r *Renewer) renewLogged(ctx context.Context) {
	err := r.Renew(ctx)
	if err != nil {
		renewals.WithLabelValues("error").Inc()
		if r.ok || r.lease == nil {
			r.Log.Error(err, "Renewing liveness Lease")
		}
		r.ok = false
		return
	}
	renewals.WithLabelValues("ok").Inc()
	lastRenew.SetToCurrentTime()
	if !r.ok {
		r.Log.Info("Liveness Lease renewed")
	}
	r.ok = true
}

// Renew creates or renews the Lease once.
func (r *Renewer) Renew(ctx context.Context) error {
	now := metav1.NewMicroTime(time.Now())
	secs := int32(r.Duration / time.Second)
	if r.lease == nil {
		l := &coordinationv1.Lease{}
		err := r.Reader.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: etcdfedv1.SpokeObjectName}, l)
		switch {
		case apierrors.IsNotFound(err):
			l = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: r.Namespace, Name: etcdfedv1.SpokeObjectName,
					Labels: map[string]string{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue},
				},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity: ptr.To(r.Holder), LeaseDurationSeconds: ptr.To(secs),
					AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](0),
				},
			}
			if err := r.Client.Create(ctx, l); err != nil {
				return fmt.Errorf("create Lease: %w", err)
			}
			r.lease = l
			return nil
		case err != nil:
			return fmt.Errorf("get Lease: %w", err)
		}
		r.lease = l
	}
	l := r.lease.DeepCopy()
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != r.Holder {
		l.Spec.HolderIdentity = ptr.To(r.Holder)
		l.Spec.AcquireTime = &now
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	}
	l.Spec.RenewTime = &now
	l.Spec.LeaseDurationSeconds = ptr.To(secs)
	if err := r.Client.Update(ctx, l); err != nil {
		r.lease = nil // read it again next time
		return fmt.Errorf("renew Lease: %w", err)
	}
	r.lease = l
	return nil
}
