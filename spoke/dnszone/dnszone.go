// Package dnszone is the spoke's EtcdDNSZone reconciler: it serves every
// EtcdDNSZone of the ring namespace from the spoke's embedded authoritative
// DNS server (dnsprovider/embedded) and reports in the zone's status whether
// and which serial it serves.
//
// A zone is swapped atomically on every change: a query is answered from the
// old or the new record set, never a mix. A record set that does not
// validate is not served; the zone keeps the last valid set it had, and the
// Served condition says why the new one was refused. When two EtcdDNSZone
// objects name the same domain, the older one is served and the other gets
// Served=False with reason DomainConflict.
//
// Every replica of the spoke serves DNS, the elected leader only writes
// status. A replica that starts rebuilds its zones from the EtcdDNSZone
// objects of the member cluster before it answers a query (Load): its
// server is started held (embedded.Config.Hold) and released once every
// zone is loaded, and it is ready (Loaded) only from then, so a spoke
// restart or rollout never answers REFUSED for a zone it is about to
// serve while the other replica answers. The leader writes the Served
// condition of every zone when it is elected (a leader-only runnable
// enqueues them all) and on every change after.
package dnszone

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/dnsprovider/embedded"
	"github.com/etcdfed/etcdfed/internal/text"
)

// Reasons of the Served condition.
const (
	ReasonServed         = "Served"         // True: the zone's records are served; status.serial is the SOA serial.
	ReasonInvalidRecords = "InvalidRecords" // False: the records do not validate; the last valid set (if any) is still served.
	ReasonDomainConflict = "DomainConflict" // False: an older EtcdDNSZone serves the same domain.
	ReasonServerError    = "ServerError"    // False: the DNS server refused the zone.
)

// FieldOwner is the field manager of the status writes.
const FieldOwner = "etcdfed-spoke"

// Reconciler serves EtcdDNSZone objects.
type Reconciler struct {
	Client client.Client
	Server *embedded.Server
	// Addresses are where the server is reached (for messages).
	Addresses []string
	// Elected is closed once this replica leads (manager.Elected): status
	// is written only then. Nil: always (one replica, no election).
	Elected <-chan struct{}

	loaded atomic.Bool
	// elected carries every zone to the controller when this replica
	// becomes the leader, so that it writes their status.
	elected chan event.TypedGenericEvent[*etcdfedv1.EtcdDNSZone]

	mu sync.Mutex
	// served maps an EtcdDNSZone to the origin it serves.
	served map[types.NamespacedName]string
}

var _ manager.LeaderElectionRunnable = (*loader)(nil)

// SetupWithManager registers the reconciler. Any zone's change re-runs every
// zone of the namespace, so that a domain conflict resolves when the winner
// goes away.
//
// It also adds the loader (Load, on every replica) and, with Elected set,
// the leader's status pass (every zone enqueued once elected).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts ...func(*builder.Builder)) error {
	r.elected = make(chan event.TypedGenericEvent[*etcdfedv1.EtcdDNSZone])
	b := ctrl.NewControllerManagedBy(mgr).
		Named("etcddnszone").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		For(&etcdfedv1.EtcdDNSZone{}).
		Watches(&etcdfedv1.EtcdDNSZone{}, handler.EnqueueRequestsFromMapFunc(r.allZones)).
		WatchesRawSource(source.Channel(r.elected, &handler.TypedEnqueueRequestForObject[*etcdfedv1.EtcdDNSZone]{}))
	for _, o := range opts {
		o(b)
	}
	if err := b.Complete(r); err != nil {
		return err
	}
	if err := mgr.Add(&loader{r: r, mgr: mgr}); err != nil {
		return fmt.Errorf("add zone loader: %w", err)
	}
	if r.Elected != nil {
		if err := mgr.Add(&leaderPass{r: r}); err != nil {
			return fmt.Errorf("add leader status pass: %w", err)
		}
	}
	return nil
}

// Loaded reports whether every EtcdDNSZone the member cluster held when
// the replica started is served and the server answers: the replica's
// readiness.
func (r *Reconciler) Loaded() bool { return r.loaded.Load() }

// loader runs load on every replica, leader or not (a bare RunnableFunc
// would run on the leader only).
type loader struct {
	r   *Reconciler
	mgr ctrl.Manager
}

// NeedLeaderElection: every replica loads its zones.
func (*loader) NeedLeaderElection() bool { return false }

func (l *loader) Start(ctx context.Context) error {
	l.r.load(ctx, l.mgr)
	return nil
}

// load rebuilds the served zones from the EtcdDNSZone objects once the
// cache has synced (retried until it lists them), then releases the
// server.
func (r *Reconciler) load(ctx context.Context, mgr ctrl.Manager) {
	log := mgr.GetLogger().WithName("dnszone")
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return
	}
	ctx = ctrl.LoggerInto(ctx, log)
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		n, err := r.Load(ctx)
		if err == nil {
			log.Info("Zones loaded, answering DNS", "objects", n, "zones", len(r.Server.Zones()))
			return
		}
		log.Error(err, "Loading zones, retrying", "after", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// Load serves every EtcdDNSZone of the namespaces the client sees (as
// Reconcile would, status written only by the leader), then releases the
// server and marks the replica loaded. It fails only when it cannot list
// the zones: a zone that fails its pass (records that do not validate, a
// status write refused) is logged and left to the controller's retries,
// and never keeps the replica from answering for the others. It returns
// how many objects it read.
func (r *Reconciler) Load(ctx context.Context) (int, error) {
	list := &etcdfedv1.EtcdDNSZoneList{}
	if err := r.Client.List(ctx, list); err != nil {
		return 0, fmt.Errorf("list EtcdDNSZones: %w", err)
	}
	for i := range list.Items {
		req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
		if _, err := r.Reconcile(ctx, req); err != nil && !errors.Is(err, reconcile.TerminalError(nil)) {
			ctrl.LoggerFrom(ctx).Error(err, "Loading a zone failed, the controller retries it", "zone", req.NamespacedName)
		}
	}
	r.Server.Release()
	r.loaded.Store(true)
	return len(list.Items), nil
}

// leaderPass enqueues every zone once this replica is elected, so that
// the new leader writes the status the old one may have left stale.
type leaderPass struct{ r *Reconciler }

// NeedLeaderElection: the pass runs once elected.
func (*leaderPass) NeedLeaderElection() bool { return true }

func (p *leaderPass) Start(ctx context.Context) error {
	// The manager starts its leader's runnables before it closes
	// Elected: wait for it, or the status writes would still be skipped.
	select {
	case <-p.r.Elected:
	case <-ctx.Done():
		return nil
	}
	list := &etcdfedv1.EtcdDNSZoneList{}
	if err := p.r.Client.List(ctx, list); err != nil {
		return nil //nolint:nilerr // every later change is written anyway
	}
	for i := range list.Items {
		select {
		case p.r.elected <- event.TypedGenericEvent[*etcdfedv1.EtcdDNSZone]{Object: &list.Items[i]}:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// leading reports whether this replica writes status.
func (r *Reconciler) leading() bool {
	if r.Elected == nil {
		return true
	}
	select {
	case <-r.Elected:
		return true
	default:
		return false
	}
}

func (r *Reconciler) allZones(ctx context.Context, o client.Object) []reconcile.Request {
	list := &etcdfedv1.EtcdDNSZoneList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if z := &list.Items[i]; z.Name != o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(z)})
		}
	}
	return reqs
}

// Origin returns the zone origin of a domain: lower case, absolute.
func Origin(domain string) string { return dns.Fqdn(strings.ToLower(domain)) }

// RecordSet converts a zone's records to the dnsprovider model, validated.
// The embedded server also needs an SOA and apex NS records.
func RecordSet(z *etcdfedv1.EtcdDNSZone) (*dnsprovider.RecordSet, error) {
	origin := Origin(z.Spec.Domain)
	recs := make([]dnsprovider.Record, 0, len(z.Spec.Records))
	for _, r := range z.Spec.Records {
		recs = append(recs, dnsprovider.Record{Name: r.Name, Type: r.Type, TTL: r.TTL, Data: r.Data})
	}
	set, err := dnsprovider.ParseRecords(origin, recs)
	if err != nil {
		return nil, err
	}
	var errs []error
	if set.SOA() == nil {
		errs = append(errs, fmt.Errorf("zone %s has no SOA record", origin))
	}
	if _, ok := set.Get(origin, dns.TypeNS); !ok {
		errs = append(errs, fmt.Errorf("zone %s has no NS records at its apex", origin))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return set, nil
}

// Reconcile serves one EtcdDNSZone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	z := &etcdfedv1.EtcdDNSZone{}
	if err := r.Client.Get(ctx, req.NamespacedName, z); err != nil {
		if apierrors.IsNotFound(err) {
			r.stopServing(ctx, req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get EtcdDNSZone: %w", err)
	}
	before := z.DeepCopy()
	origin := Origin(z.Spec.Domain)

	if winner, err := r.owner(ctx, z, origin); err != nil {
		return ctrl.Result{}, err
	} else if winner != "" {
		r.release(req.NamespacedName)
		setServed(z, metav1.ConditionFalse, ReasonDomainConflict, fmt.Sprintf("EtcdDNSZone %s, older, serves domain %s", winner, origin))
		return ctrl.Result{}, r.patchStatus(ctx, z, before)
	}

	set, err := RecordSet(z)
	if err != nil {
		msg := err.Error()
		if cur := r.Server.Zone(origin); cur != nil && r.isServing(req.NamespacedName, origin) {
			msg = fmt.Sprintf("%s; still serving serial %d", msg, cur.Serial())
		}
		setServed(z, metav1.ConditionFalse, ReasonInvalidRecords, msg)
		return ctrl.Result{}, errors.Join(r.patchStatus(ctx, z, before), reconcile.TerminalError(err))
	}
	if old := r.origin(req.NamespacedName); old != "" && old != origin {
		log.Info("Zone changed domain, no longer serving the old one", "old", old, "new", origin)
		r.stopServing(ctx, req.NamespacedName)
	}
	if cur := r.Server.Zone(origin); cur == nil || !cur.Equal(set) {
		log.Info("Serving zone", "zone", origin, "serial", set.Serial(), "rrsets", len(set.RRsets()), "generation", z.Generation)
		if err := r.Server.SetZone(set); err != nil {
			setServed(z, metav1.ConditionFalse, ReasonServerError, err.Error())
			return ctrl.Result{}, errors.Join(r.patchStatus(ctx, z, before), fmt.Errorf("serve zone %s: %w", origin, err))
		}
	}
	r.claim(req.NamespacedName, origin)
	setServed(z, metav1.ConditionTrue, ReasonServed, fmt.Sprintf("zone %s served with serial %d at %s", origin, set.Serial(), strings.Join(r.Addresses, ", ")))
	z.Status.Serial = int64(set.Serial())
	z.Status.ObservedGeneration = z.Generation
	zoneSerial.WithLabelValues(origin).Set(float64(set.Serial()))
	return ctrl.Result{}, r.patchStatus(ctx, z, before)
}

// owner returns the name of an older EtcdDNSZone with the same origin, or
// "" when z wins.
func (r *Reconciler) owner(ctx context.Context, z *etcdfedv1.EtcdDNSZone, origin string) (string, error) {
	list := &etcdfedv1.EtcdDNSZoneList{}
	if err := r.Client.List(ctx, list, client.InNamespace(z.Namespace)); err != nil {
		return "", fmt.Errorf("list EtcdDNSZones: %w", err)
	}
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name == z.Name || Origin(o.Spec.Domain) != origin {
			continue
		}
		if o.CreationTimestamp.Before(&z.CreationTimestamp) ||
			(o.CreationTimestamp.Equal(&z.CreationTimestamp) && o.Name < z.Name) {
			return o.Name, nil
		}
	}
	return "", nil
}

func (r *Reconciler) origin(key types.NamespacedName) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served[key]
}

func (r *Reconciler) isServing(key types.NamespacedName, origin string) bool {
	return r.origin(key) == origin
}

func (r *Reconciler) claim(key types.NamespacedName, origin string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.served == nil {
		r.served = map[types.NamespacedName]string{}
	}
	r.served[key] = origin
	zonesServed.Set(float64(len(r.served)))
}

// release forgets key without touching the server (another object took the
// origin over).
func (r *Reconciler) release(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.served, key)
	zonesServed.Set(float64(len(r.served)))
}

// stopServing removes the zone key served, if it still holds its origin.
func (r *Reconciler) stopServing(ctx context.Context, key types.NamespacedName) {
	r.mu.Lock()
	origin, ok := r.served[key]
	delete(r.served, key)
	holder := false
	for _, o := range r.served {
		holder = holder || o == origin
	}
	zonesServed.Set(float64(len(r.served)))
	r.mu.Unlock()
	if ok && !holder && r.Server.RemoveZone(origin) {
		ctrl.LoggerFrom(ctx).Info("Stopped serving zone", "zone", origin)
		zoneSerial.DeleteLabelValues(origin)
	}
}

func setServed(z *etcdfedv1.EtcdDNSZone, status metav1.ConditionStatus, reason, msg string) {
	msg = text.Truncate(msg, 32768)
	meta.SetStatusCondition(&z.Status.Conditions, metav1.Condition{
		Type: etcdfedv1.ConditionServed, Status: status, Reason: reason, Message: msg, ObservedGeneration: z.Generation,
	})
}

func (r *Reconciler) patchStatus(ctx context.Context, z, before *etcdfedv1.EtcdDNSZone) error {
	if !r.leading() || equality.Semantic.DeepEqual(before.Status, z.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, z, client.MergeFrom(before), client.FieldOwner(FieldOwner)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch EtcdDNSZone status: %w", err)
	}
	return nil
}
