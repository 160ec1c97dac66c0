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
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/registry"
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

// registrations lists the hub's registration Secrets, keeping their
// values to scrub and a REST config of each, and writes their metadata.
func (b *bundle) registrations(ctx context.Context, hub client.Client, ns string) map[string]*rest.Config {
	var list corev1.SecretList
	if err := hub.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{registry.KubeconfigSecretLabel: "true"}); err != nil {
		b.fail("registrations in the hub's "+ns, err)
		return nil
	}
	out := map[string]*rest.Config{}
	for i := range list.Items {
		sec := &list.Items[i]
		b.keep(sec)
		if cfg, err := registry.RESTConfig(sec); err == nil {
			out[sec.Name] = cfg
		} else {
			b.fail("registration "+sec.Name, err)
		}
	}
	return out
}

// keep records a Secret's values for scrubbing.
func (b *bundle) keep(sec *corev1.Secret) {
	for _, v := range sec.Data {
		if len(v) >= 8 {
			b.secrets = append(b.secrets, v)
		}
	}
}

// secretsOf writes the Secrets of a namespace (matching opts) as keys and
// sizes only, and keeps their values for scrubbing.
func (b *bundle) secretsOf(ctx context.Context, c client.Client, file, ns string, labels client.MatchingLabels) {
	var list corev1.SecretList
	opts := []client.ListOption{client.InNamespace(ns)}
	if labels != nil {
		opts = append(opts, labels)
	}
	if err := c.List(ctx, &list, opts...); err != nil {
		b.fail("Secrets in "+ns, err)
		return
	}
	b.add(file, b.redactedSecrets(list.Items))
}

func (b *bundle) redactedSecrets(items []corev1.Secret) []byte {
	type redacted struct {
		Name        string            `json:"name"`
		Type        corev1.SecretType `json:"type"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
		Keys        map[string]string `json:"keys"`
	}
	out := make([]redacted, 0, len(items))
	for i := range items {
		s := &items[i]
		b.keep(s)
		r := redacted{Name: s.Name, Type: s.Type, Labels: s.Labels, Annotations: s.Annotations, Keys: map[string]string{}}
		for k, v := range s.Data {
			r.Keys[k] = fmt.Sprintf("<redacted, %d bytes>", len(v))
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	data, _ := yaml.Marshal(out)
	return data
}

// events writes the events of a namespace matching a field selector.
func (b *bundle) events(ctx context.Context, cs kubernetes.Interface, file, ns, selector string) {
	ev, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: selector, Limit: 500})
	if err != nil {
		b.fail("events in "+ns, err)
		return
	}
	sort.Slice(ev.Items, func(i, j int) bool { return ev.Items[i].LastTimestamp.Before(&ev.Items[j].LastTimestamp) })
	for i := range ev.Items {
		ev.Items[i].ManagedFields = nil
	}
	b.addYAML(file, ev.Items)
}

// pods writes the pods matching selector and the bounded logs of each of
// their containers (the previous run's too, when a container restarted).
func (b *bundle) pods(ctx context.Context, cs kubernetes.Interface, dir, ns, selector string, o Options) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 200})
	if err != nil {
		b.fail("pods in "+dir+"/"+ns, err)
		return
	}
	for i := range pods.Items {
		pods.Items[i].ManagedFields = nil
	}
	b.addYAML(dir+"/pods.yaml", pods.Items)
	for _, p := range pods.Items {
		for _, c := range p.Spec.InitContainers {
			b.log(ctx, cs, dir, p, c.Name, false, o)
		}
		for _, c := range p.Spec.Containers {
			b.log(ctx, cs, dir, p, c.Name, false, o)
			for _, st := range p.Status.ContainerStatuses {
				if st.Name == c.Name && st.RestartCount > 0 {
					b.log(ctx, cs, dir, p, c.Name, true, o)
				}
			}
		}
	}
}

func (b *bundle) log(ctx context.Context, cs kubernetes.Interface, dir string, p corev1.Pod, container string, previous bool, o Options) {
	lines, limit := o.LogLines, o.LogBytes
	req := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, TailLines: &lines, LimitBytes: &limit, Previous: previous})
	data, err := req.DoRaw(ctx)
	name := fmt.Sprintf("%s/logs/%s_%s.log", dir, p.Name, container)
	if previous {
		name = strings.TrimSuffix(name, ".log") + ".previous.log"
	}
	if err != nil {
		b.fail("log of "+p.Name+"/"+container, err)
		return
	}
	b.add(name, data)
}

// member collects one member cluster: with an admin config when given,
// else with the hub's credentials from its registration.
func (b *bundle) member(ctx context.Context, name string, reg *rest.Config, ec *etcdfedv1.EtcdCluster, o Options) {
	dir := "members/" + name
	cfg, admin := o.Members[name], true
	if cfg == nil {
		cfg, admin = reg, false
	}
	if cfg == nil {
		b.fail(dir, fmt.Errorf("not registered in the hub and no --member-kubeconfig %s=FILE given", name))
		return
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = o.Timeout
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.fail(dir, err)
		return
	}
	ns := o.RingNamespace
	for file, list := range map[string]client.ObjectList{
		"etcdmembers.yaml":  &etcdfedv1.EtcdMemberList{},
		"etcdspokes.yaml":   &etcdfedv1.EtcdSpokeList{},
		"etcddnszones.yaml": &etcdfedv1.EtcdDNSZoneList{},
		"leases.yaml":       &coordinationv1.LeaseList{},
	} {
		l := list
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			b.fail(dir+"/"+file, err)
			continue
		}
		b.addYAML(dir+"/"+file, stripManaged(l))
	}
	var secs corev1.SecretList
	if err := c.List(ctx, &secs, client.InNamespace(ns), client.MatchingLabels{etcdfedv1.LabelClusterUID: string(ec.UID)}); err != nil {
		b.fail(dir+"/secrets.yaml", err)
	} else {
		b.add(dir+"/secrets.yaml", b.redactedSecrets(secs.Items))
	}
	if !admin {
		b.fail(dir+" pods, events and logs", fmt.Errorf("read with the hub's own credentials, which may not read them: give --member-kubeconfig %s=FILE", name))
		return
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.fail(dir, err)
		return
	}
	b.events(ctx, cs, dir+"/events.yaml", ns, "")
	b.pods(ctx, cs, dir+"/spoke", ns, "app.kubernetes.io/name=etcdfed-spoke", o)
	b.pods(ctx, cs, dir+"/etcd", ns, etcdfedv1.LabelClusterUID+"="+string(ec.UID), o)
}

// etcd asks every endpoint of the ring for its status, the member list and
// the alarms, with the hub's client certificate (read, used in memory,
// never written).
func (b *bundle) etcd(ctx context.Context, hub client.Client, ec *etcdfedv1.EtcdCluster, o Options) {
	if len(ec.Status.Endpoints) == 0 {
		b.fail("etcd", fmt.Errorf("the EtcdCluster has no endpoints in its status yet"))
		return
	}
	cfg := clientv3.Config{Endpoints: ec.Status.Endpoints, DialTimeout: o.Timeout}
	if ec.Spec.TLS.Mode.Enabled() {
		sec := &corev1.Secret{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: pki.HubClientSecretName(ec)}, sec); err != nil {
			b.fail("etcd: the hub's client certificate", err)
			return
		}
		b.keep(sec)
		tlsCfg, err := pki.ClientTLS(sec.Data[pki.KeyCA], &pki.Leaf{CertPEM: sec.Data[pki.KeyCert], KeyPEM: sec.Data[pki.KeyKey]})
		if err != nil {
			b.fail("etcd: the hub's client certificate", err)
			return
		}
		cfg.TLS = tlsCfg
	}
	cl, err := clientv3.New(cfg)
	if err != nil {
		b.fail("etcd", err)
		return
	}
	defer cl.Close()
	type status struct {
		Endpoint  string   `json:"endpoint"`
		Error     string   `json:"error,omitempty"`
		ID        string   `json:"id,omitempty"`
		Version   string   `json:"version,omitempty"`
		DBSize    int64    `json:"dbSize,omitempty"`
		DBInUse   int64    `json:"dbSizeInUse,omitempty"`
		Leader    string   `json:"leader,omitempty"`
		IsLearner bool     `json:"isLearner,omitempty"`
		RaftIndex uint64   `json:"raftIndex,omitempty"`
		RaftTerm  uint64   `json:"raftTerm,omitempty"`
		Errors    []string `json:"errors,omitempty"`
	}
	var out []status
	for _, ep := range ec.Status.Endpoints {
		sctx, cancel := context.WithTimeout(ctx, o.Timeout)
		r, err := cl.Status(sctx, ep)
		cancel()
		st := status{Endpoint: ep}
		if err != nil {
			st.Error = err.Error()
		} else {
			st.ID, st.Version, st.DBSize, st.DBInUse = fmt.Sprintf("%x", r.Header.MemberId), r.Version, r.DbSize, r.DbSizeInUse
			st.Leader, st.IsLearner, st.RaftIndex, st.RaftTerm, st.Errors = fmt.Sprintf("%x", r.Leader), r.IsLearner, r.RaftIndex, r.RaftTerm, r.Errors
		}
		out = append(out, st)
	}
	data, _ := json.MarshalIndent(out, "", "  ")
	b.add("etcd/endpoint-status.json", data)
	sctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if ml, err := cl.MemberList(sctx); err != nil {
		b.fail("etcd member list", err)
	} else {
		data, _ := json.MarshalIndent(ml.Members, "", "  ")
		b.add("etcd/member-list.json", data)
	}
	if al, err := cl.AlarmList(sctx); err != nil {
		b.fail("etcd alarms", err)
	} else {
		data, _ := json.MarshalIndent(al.Alarms, "", "  ")
		b.add("etcd/alarms.json", data)
	}
}

var (
	pemKeyRE = regexp.MustCompile(`(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----`)
	jwtRE    = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+`)
	bearerRE = regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}`)
)

// scrub removes private keys, JWTs, bearer tokens and every known Secret
// value (raw and base64) from data.
func (b *bundle) scrub(data []byte) []byte {
	data = pemKeyRE.ReplaceAll(data, []byte("<private key redacted>"))
	data = jwtRE.ReplaceAll(data, []byte("<token redacted>"))
	data = bearerRE.ReplaceAll(data, []byte("${1}<token redacted>"))
	for _, v := range b.secrets {
		for _, form := range [][]byte{v, []byte(base64.StdEncoding.EncodeToString(v)), bytes.TrimSpace(v)} {
			if len(form) >= 8 {
				data = bytes.ReplaceAll(data, form, []byte("<secret redacted>"))
			}
		}
		// A PEM certificate or key appears in files line by line too.
		for _, line := range bytes.Split(v, []byte("\n")) {
			if line = bytes.TrimSpace(line); len(line) >= 40 && !bytes.HasPrefix(line, []byte("-----")) {
				data = bytes.ReplaceAll(data, line, []byte("<secret redacted>"))
			}
		}
	}
	return data
}

func (b *bundle) write(w io.Writer, o Options) (Summary, error) {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(b.files))
	for n := range b.files {
		names = append(names, n)
	}
	sort.Strings(names)
	s := Summary{Errors: b.errs}
	for _, n := range names {
		data := b.scrub(b.files[n])
		hdr := &tar.Header{Name: topDir + "/" + n, Mode: 0o644, Size: int64(len(data)), ModTime: o.Now()}
		if err := tw.WriteHeader(hdr); err != nil {
			return s, err
		}
		if _, err := tw.Write(data); err != nil {
			return s, err
		}
		s.Files++
		s.Bytes += len(data)
	}
	if err := tw.Close(); err != nil {
		return s, err
	}
	return s, zw.Close()
}

// tailFile returns at most max bytes of the end of a file, from a line
// start.
func tailFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max64(0, fi.Size()-max)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, err
	}
	if off > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return data, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// stripManaged drops the managed fields of every item of a list.
func stripManaged(l client.ObjectList) runtime.Object {
	_ = meta.EachListItem(l, func(o runtime.Object) error {
		if m, err := meta.Accessor(o); err == nil {
			m.SetManagedFields(nil)
		}
		return nil
	})
	return l
}

// Read returns the files of a bundle, by their names inside it (e.g.
// "etcd/endpoint-status.json").
func Read(r io.Reader) (map[string]string, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(h.Name, topDir+"/")] = string(b)
	}
}
