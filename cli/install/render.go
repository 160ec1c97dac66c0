package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/resid"
	"sigs.k8s.io/yaml"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/config"
	"github.com/etcdfed/etcdfed/internal/version"
)

// Names shared with config/.
const (
	// Namespace is the hub's namespace in the hub cluster and the ring
	// namespace in member clusters, as config/ names it.
	Namespace = "etcdfed-system"
	// Images is where config/'s images come from: <Images>/hub,
	// <Images>/spoke and <Images>/etcdfed-init (the member pods' init
	// containers), the Dockerfile's stages of those names.
	Images = version.Registry
	// GossipSecret holds the ring's gossip key (key "key"), in the hub's
	// namespace and in every member cluster's ring namespace: the Secret
	// the hub keeps there and writes into member clusters (hub/spokes).
	GossipSecret = etcdfedv1.GossipSecretName
	// GossipKeyKey is its key.
	GossipKeyKey = etcdfedv1.GossipSecretKey
	// HubDeployment and SpokeDeployment are config/'s Deployments.
	HubDeployment   = "etcdfed-hub"
	SpokeDeployment = "etcdfed-spoke"
	// SpokeService is the spoke's DNS Service (every ready replica).
	SpokeService = "etcdfed-spoke"
	// SpokeGossipService is the spoke's gossip Service (the leader).
	SpokeGossipService = "etcdfed-spoke-gossip"
	// SpokeConfigMap holds a member cluster's spoke flags.
	SpokeConfigMap = "etcdfed-spoke"
)

// Labels on what this package writes, to find it again (prune, unjoin,
// counts in tests).
const (
	// LabelHubInstall marks what `etcdfed hub install` wrote.
	LabelHubInstall = "etcdfed.dev/hub-install"
	// LabelJoinedAs marks what `etcdfed cluster join NAME` wrote, in the
	// member cluster and (the registration Secret) in the hub; the value
	// is NAME.
	LabelJoinedAs = "etcdfed.dev/joined-as"
	// FieldManager owns the fields this package applies.
	FieldManager = "etcdfed-install"
)

// DefaultImageTag is the tag of this build's released images.
func DefaultImageTag() string {
	return regexp.MustCompile(`[^A-Za-z0-9_.-]`).ReplaceAllString(version.String(), "-")
}

// Knobs are the options both installs share.
type Knobs struct {
	// ImageRepository and ImageTag give the images: <repository>/hub,
	// <repository>/spoke and <repository>/etcdfed-init, each :<tag>;
	// Images and DefaultImageTag when empty.
	ImageRepository, ImageTag string
	// Image, when set, is one image that holds every binary (the
	// Dockerfile's default stage, etcdfed: hub, spoke, etcdfed-init), for
	// hub, spoke and the member pods' init containers alike.
	Image string
	// LogLevel: "" or "info" (the default), "debug", or a number (the
	// hub's --zap-log-level, the spoke's -v).
	LogLevel string
	// NoLeaderElection runs one replica without the election Lease
	// (component no-leader-election).
	NoLeaderElection bool
}

// image is the reference of one of the images (hub, spoke, etcdfed-init).
func (k Knobs) image(name string) string {
	if k.Image != "" {
		return k.Image
	}
	repo, tag := k.ImageRepository, k.ImageTag
	if repo == "" {
		repo = Images
	}
	if tag == "" {
		tag = DefaultImageTag()
	}
	return strings.TrimSuffix(repo, "/") + "/" + name + ":" + tag
}

// overlay is a kustomization generated over config/, with the knobs.
type overlay struct {
	kust  types.Kustomization
	files map[string][]byte
}

func newOverlay(k Knobs, labels map[string]string) (*overlay, error) {
	o := &overlay{files: map[string][]byte{}}
	o.kust.APIVersion, o.kust.Kind = types.KustomizationVersion, types.KustomizationKind
	for _, name := range []string{"hub", "spoke"} {
		img, err := imageTransform(Images+"/"+name, k.image(name))
		if err != nil {
			return nil, err
		}
		o.kust.Images = append(o.kust.Images, img)
	}
	o.kust.Labels = []types.Label{{Pairs: labels}}
	switch lvl := strings.ToLower(k.LogLevel); lvl {
	case "", "info", "0":
	case "debug", "1":
		o.component("debug-logging")
	default:
		if !regexp.MustCompile(`^[0-9]$`).MatchString(lvl) {
			return nil, fmt.Errorf("log level %q: want info, debug or a number 0-9", k.LogLevel)
		}
		o.patch(HubDeployment, `[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--zap-log-level=`+lvl+`"}]`)
		o.patch(SpokeDeployment, `[{"op":"add","path":"/spec/template/spec/containers/0/env/-","value":{"name":"ETCDFED_SPOKE_V","value":"`+lvl+`"}}]`)
	}
	if k.NoLeaderElection {
		o.component("no-leader-election")
	}
	return o, nil
}

func (o *overlay) resource(p string) { o.kust.Resources = append(o.kust.Resources, "../config/"+p) }
func (o *overlay) component(c string) {
	o.kust.Components = append(o.kust.Components, "../config/components/"+c)
}

// file adds a generated file as a resource.
func (o *overlay) file(name string, data []byte) {
	o.files[name] = data
	o.kust.Resources = append(o.kust.Resources, name)
}

func (o *overlay) patch(deployment, jsonPatch string) {
	o.kust.Patches = append(o.kust.Patches, types.Patch{
		Patch:  jsonPatch,
		Target: &types.Selector{ResId: resid.ResId{Gvk: resid.Gvk{Group: "apps", Kind: "Deployment"}, Name: deployment}},
	})
}

// imageTransform turns an image reference into kustomize's images entry
// for the image config/ names name.
func imageTransform(name, ref string) (types.Image, error) {
	img := types.Image{Name: name}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest {
		img.Digest = digest
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		img.NewTag = name[i+1:]
		name = name[:i]
	} else if !hasDigest {
		img.NewTag = "latest"
	}
	img.NewName = name
	if name == "" || strings.ContainsAny(ref, " \t\n") {
		return types.Image{}, fmt.Errorf("image %q: want NAME[:TAG][@DIGEST]", ref)
	}
	return img, nil
}

// render builds the overlay over an in-memory copy of config/ and returns
// its objects in kustomize's order (CRDs and namespaces first).
func (o *overlay) render() ([]*unstructured.Unstructured, error) {
	mem, err := configFS()
	if err != nil {
		return nil, err
	}
	kust, err := yaml.Marshal(o.kust)
	if err != nil {
		return nil, err
	}
	if err := mem.WriteFile("/overlay/kustomization.yaml", kust); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(o.files))
	for n := range o.files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := mem.WriteFile(path.Join("/overlay", n), o.files[n]); err != nil {
			return nil, err
		}
	}
	return build(mem, "/overlay")
}

// RenderPackage renders a kustomization of config/ as `kubectl kustomize
// config/<dir>` would (for example "samples/install/hub").
func RenderPackage(dir string) ([]*unstructured.Unstructured, error) {
	mem, err := configFS()
	if err != nil {
		return nil, err
	}
	return build(mem, path.Join("/config", dir))
}

// configFS is an in-memory copy of config/ at /config.
func configFS() (filesys.FileSystem, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(config.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := config.FS.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/config", p), data)
	})
	if err != nil {
		return nil, fmt.Errorf("copy config/: %w", err)
	}
	return mem, nil
}

func build(mem filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize: %w", err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	return decodeYAML(out)
}

// decodeYAML decodes a multi-document YAML stream.
func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// namespaceYAML is the Namespace object of a generated overlay.
func namespaceYAML(name string) []byte {
	return []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n")
}

// HubOptions configure the hub cluster's install.
type HubOptions struct {
	Knobs
	// External: the hub runs outside the cluster (the local environment's
	// process mode), so no Deployment (nor a metrics Service in front of
	// it); everything else is installed.
	External bool
	// MetricsService adds a Service in front of the hub's metrics port
	// (component hub-metrics).
	MetricsService bool
	// PrometheusOperator adds a ServiceMonitor and the shipped alerts as
	// a PrometheusRule (component prometheus-operator; needs the
	// operator's CRDs, and MetricsService).
	PrometheusOperator bool
	// EtcdClusterNamespaces get a RoleBinding that lets the hub keep its
	// Secrets and events there (config/samples/hub_access.yaml).
	EtcdClusterNamespaces []string
	// Shard, when named, makes the hub Deployment the shard's,
	// etcdfed-hub-NAME, beside the other shards' (docs/install.md).
	Shard HubShard
	// MetricsReaders are who may read the hub's /metrics (its
	// --metrics-readers: NAMESPACE/NAME, user:NAME, group:NAME); none:
	// every caller is refused.
	MetricsReaders []string
}

// metricsReaderRE is an entry of the hub's --metrics-readers (the hub
// checks it again, internal/metricsserve.ParseReaders): no comma, quote
// or backslash reaches the Deployment's arguments.
var metricsReaderRE = regexp.MustCompile(`^([a-z0-9][a-z0-9-]{0,62}/[a-z0-9][a-z0-9.-]{0,252}|(user|group):[A-Za-z0-9:@._-]{1,253})$`)

// RenderHub returns the objects of the hub cluster's install.
func RenderHub(o HubOptions) ([]*unstructured.Unstructured, error) {
	if o.External {
		// The metrics Service and the ServiceMonitor front the hub's pods:
		// there are none.
		o.MetricsService, o.PrometheusOperator = false, false
	}
	if o.PrometheusOperator && !o.MetricsService {
		return nil, errors.New("the Prometheus Operator's ServiceMonitor scrapes the metrics Service: enable the metrics Service too")
	}
	ov, err := newOverlay(o.Knobs, map[string]string{LabelHubInstall: "true"})
	if err != nil {
		return nil, err
	}
	ov.resource("crd")
	ov.file("namespace.yaml", namespaceYAML(Namespace))
	if o.External {
		ov.resource("rbac/hub")
	} else {
		ov.resource("hub")
	}
	if o.MetricsService {
		ov.component("hub-metrics")
	}
	if len(o.MetricsReaders) > 0 && !o.External {
		for _, r := range o.MetricsReaders {
			if !metricsReaderRE.MatchString(r) {
				return nil, fmt.Errorf("metrics reader %q: want NAMESPACE/NAME (a ServiceAccount), user:NAME or group:NAME", r)
			}
		}
		ov.patch(HubDeployment, `[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--metrics-readers=`+strings.Join(o.MetricsReaders, ",")+`"}]`)
	}
	if o.PrometheusOperator {
		ov.component("prometheus-operator")
	}
	for _, ns := range o.EtcdClusterNamespaces {
		ov.file("access-"+ns+".yaml", []byte(fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: etcdfed-hub
  namespace: %s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: etcdfed-hub-etcdcluster-namespace
subjects:
- kind: ServiceAccount
  name: etcdfed-hub
  namespace: %s
`, ns, Namespace)))
	}
	objs, err := ov.render()
	if err != nil || o.Shard.Name == "" || o.External {
		return objs, err
	}
	return objs, shardHub(objs, o.Shard)
}

// Spoke exposures.
const (
	// ExposeLoadBalancer: a LoadBalancer Service for DNS and one for
	// gossip, each advertised at its address (config/spoke).
	ExposeLoadBalancer = "LoadBalancer"
	// ExposeNodePort: fixed NodePorts on every node, advertised at the
	// node's IP (component spoke-nodeport).
	ExposeNodePort = "NodePort"
)

// MemberOptions configure a member cluster's install.
type MemberOptions struct {
	Knobs
	// Name is the cluster's name in the hub.
	Name string
	// External: the spoke runs outside the cluster (the local
	// environment's process mode): no Deployment, Service or ConfigMap.
	External bool
	// Expose is ExposeLoadBalancer (default) or ExposeNodePort.
	Expose string
	// Advertise is the host other clusters reach the spoke's DNS (port
	// 53) at, and its gossip (port 7946) unless GossipAdvertise is set;
	// with ExposeLoadBalancer and none given, Join waits for the DNS
	// Service's address.
	Advertise string
	// GossipAdvertise is the host other clusters reach the spoke's gossip
	// at (port 7946), when not Advertise: with ExposeLoadBalancer and
	// Advertise not given, Join waits for the gossip Service's address.
	GossipAdvertise string
	// HelperImage is what member pods run their init containers from;
	// the knobs' etcdfed-init image when empty.
	HelperImage string
	// GossipProfile is wan (default) or lan.
	GossipProfile string
}

// RenderMember returns the objects of a member cluster's install: CRDs,
// ring namespace, the hub's RBAC there, and the spoke.
func RenderMember(o MemberOptions) ([]*unstructured.Unstructured, error) {
	ov, err := newOverlay(o.Knobs, map[string]string{LabelJoinedAs: o.Name})
	if err != nil {
		return nil, err
	}
	ov.resource("crd")
	ov.file("namespace.yaml", namespaceYAML(Namespace))
	ov.resource("rbac/hub-member")
	if o.External {
		ov.resource("rbac/spoke")
		return ov.render()
	}
	ov.resource("spoke")
	switch o.Expose {
	case "", ExposeLoadBalancer:
	case ExposeNodePort:
		ov.component("spoke-nodeport")
	default:
		return nil, fmt.Errorf("spoke exposure %q: want %s or %s", o.Expose, ExposeLoadBalancer, ExposeNodePort)
	}
	helper := o.HelperImage
	if helper == "" {
		helper = o.image("etcdfed-init")
	}
	profile := o.GossipProfile
	if profile == "" {
		profile = "wan"
	}
	values := []string{"CLUSTER_NAME=" + o.Name, "HELPER_IMAGE=" + helper, "GOSSIP_PROFILE=" + profile}
	if o.Advertise != "" {
		gossip := o.GossipAdvertise
		if gossip == "" {
			gossip = o.Advertise
		}
		values = append(values,
			"DNS_ADVERTISE_ADDRESS="+net.JoinHostPort(o.Advertise, "53"),
			"GOSSIP_ADVERTISE="+net.JoinHostPort(gossip, "7946"))
	}
	ov.kust.ConfigMapGenerator = append(ov.kust.ConfigMapGenerator, types.ConfigMapArgs{GeneratorArgs: types.GeneratorArgs{
		Namespace: Namespace, Name: SpokeConfigMap, Behavior: "merge",
		KvPairSources: types.KvPairSources{LiteralSources: values},
	}})
	return ov.render()
}
