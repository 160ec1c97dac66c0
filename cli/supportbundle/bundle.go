// Package supportbundle collects what a maintainer needs to see of one
// EtcdCluster into one archive (`etcdfed support-bundle`): the EtcdCluster
// and its events, the hub's registrations (without credentials), in every
// member cluster the EtcdMembers, EtcdSpokes, DNS zones, Leases and
// events, the hub's and the spokes' logs and the members' (bounded), and
// etcd's own view (endpoint status, member list, alarms).
//
// Nothing secret goes in: Secrets appear with their keys and sizes only,
// and every text written is scrubbed of private keys, bearer tokens and
// JWTs, and of the value of every Secret the bundle could read (raw and
// base64), before it is archived. What could not be collected is listed
// in errors.txt, with why.
package supportbundle

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/scheme"
	"github.com/etcdfed/etcdfed/internal/version"
)

// topDir is the directory every file of a bundle is in.
const topDir = "etcdfed-support-bundle"

// Options configure Collect.
type Options struct {
	// Hub is a REST config of the hub cluster, allowed to read the
	// EtcdCluster, its events and Secrets, the hub's namespace and pods.
	Hub *rest.Config
	// Namespace and Name are the EtcdCluster's.
	Namespace, Name string
	// HubNamespace is where the hub runs and keeps its registrations.
	HubNamespace string
	// RingNamespace is the ring namespace in member clusters.
	RingNamespace string
	// Members are admin REST configs of member clusters by name; a member
	// cluster without one is read with the hub's own credentials from its
	// registration (no pods, no logs: the hub may not read them).
	Members map[string]*rest.Config
	// LogFiles are files to include (bounded tails), for a hub or spokes
	// run as processes (the local environment's logs/*.log).
	LogFiles []string
	// LogLines and LogBytes bound each log; defaults 2000 lines, 1 MiB.
	LogLines int64
	LogBytes int64
	// Timeout bounds each request; default 10s.
	Timeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.HubNamespace == "" {
		o.HubNamespace = etcdfedv1.DefaultRingNamespace
	}
	if o.RingNamespace == "" {
		o.RingNamespace = etcdfedv1.DefaultRingNamespace
	}
	if o.LogLines == 0 {
		o.LogLines = 2000
	}
	if o.LogBytes == 0 {
		o.LogBytes = 1 << 20
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// bundle is the archive's content before it is written.
type bundle struct {
	files   map[string][]byte
	errs    []string
	secrets [][]byte // values to scrub
}

func (b *bundle) add(name string, data []byte) { b.files[name] = data }

func (b *bundle) fail(what string, err error) {
	b.errs = append(b.errs, fmt.Sprintf("%s: %v", what, err))
}

func (b *bundle) addYAML(name string, obj any) {
	data, err := yaml.Marshal(obj)
	if err != nil {
		b.fail(name, err)
		return
	}
	b.add(name, data)
}

// Collect gathers the bundle and writes it to w as a gzipped tar.
func Collect(ctx context.Context, o Options, w io.Writer) (Summary, error) {
	o.defaults()
	b := &bundle{files: map[string][]byte{}}
	hubCfg := rest.CopyConfig(o.Hub)
	hubCfg.Timeout = o.Timeout
	hub, err := client.New(hubCfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return Summary{}, fmt.Errorf("hub client: %w", err)
	}
	hubCS, err := kubernetes.NewForConfig(hubCfg)
	if err != nil {
		return Summary{}, err
	}
	ec := &etcdfedv1.EtcdCluster{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, ec); err != nil {
		return Summary{}, fmt.Errorf("get EtcdCluster %s/%s: %w", o.Namespace, o.Name, err)
	}
	ec.ManagedFields = nil
	b.addYAML("hub/etcdcluster.yaml", ec)
	b.events(ctx, hubCS, "hub/events.yaml", o.Namespace, fields.OneTermEqualSelector("involvedObject.name", o.Name).String())
	b.secretsOf(ctx, hub, "hub/secrets-"+o.Namespace+".yaml", o.Namespace, nil)
	regs := b.registrations(ctx, hub, o.HubNamespace)
	b.secretsOf(ctx, hub, "hub/secrets-"+o.HubNamespace+".yaml", o.HubNamespace, nil)
	b.pods(ctx, hubCS, "hub", o.HubNamespace, "app.kubernetes.io/name=etcdfed-hub", o)

	clusters := map[string]bool{}
	for _, m := range ec.Status.Members {
		if m.Cluster != "" {
			clusters[m.Cluster] = true
		}
	}
	for name := range regs {
		clusters[name] = true
	}
	names := make([]string, 0, len(clusters))
	for n := range clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		b.member(ctx, name, regs[name], ec, o)
	}
	b.etcd(ctx, hub, ec, o)
	for _, f := range o.LogFiles {
		data, err := tailFile(f, o.LogBytes)
		if err != nil {
			b.fail("log file "+f, err)
			continue
		}
		b.add("logs/"+filepath.Base(f), data)
	}
	b.add("README.txt", []byte(fmt.Sprintf(`etcdfed support bundle of EtcdCluster %s/%s
collected %s by etcdfed %s

hub/                the EtcdCluster, its events, the hub's registrations and Secrets
                    (keys and sizes only), the hub's pods and logs
members/<cluster>/  EtcdMembers, EtcdSpokes, EtcdDNSZones, Leases, events,
                    Secrets (keys and sizes only), pods and logs where allowed
etcd/               endpoint status, member list and alarms, asked of etcd
logs/               log files given with --log-file
errors.txt          what could not be collected, and why

No Secret value is in this archive: Secrets are listed with their keys and
sizes, and every file was scrubbed of private keys, tokens and the value of
every Secret the collector read.
`, o.Namespace, o.Name, o.Now().UTC().Format(time.RFC3339), version.String())))
	if len(b.errs) > 0 {
		b.add("errors.txt", []byte(strings.Join(b.errs, "\n")+"\n"))
	}
	return b.write(w, o)
}

// Summary says what a bundle holds.
type Summary struct {
	Files  int
	Bytes  int
	Errors []string
}
