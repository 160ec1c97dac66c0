// Package etcdtest runs real multi-member etcd clusters (bin/etcd) for
// tests, on 127.0.0.1 with free ports, plain or with TLS from a hub/pki CA.
// Every process gets SIGKILL when the test binary dies (parent-death
// signal) and is stopped by its pid when the test ends. Test-only:
// production code never imports it.
package etcdtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// Options configure a cluster.
type Options struct {
	// Members is the number of members (default 3).
	Members int
	// CA, when set, turns on client and peer TLS with certificates it
	// issues (SANs localhost and 127.0.0.1, client-cert auth).
	CA *pki.CA
	// Name prefixes member names (default "etcd").
	Name string
	// ExtraArgs are added to every member's command line.
	ExtraArgs []string
	// Proxied puts a Proxy in front of every member's client port and has
	// the member advertise the proxy's URL, so clients that follow the
	// member list (as the hub does) go through it. Plain HTTP only.
	Proxied bool
	// Binary is the etcd of bin/ the members run (default etcd, such as
	// etcd-3.7.3 for another release hack/tools.sh builds).
	Binary string
	// Env is added to every member's environment (such as
	// ETCDFED_DNS_SERVERS, so that members resolve a ring's names).
	Env []string
	// Hosts, when set, give member i its own address Hosts[i] (a loopback
	// address such as a local environment's zone block), on which it
	// listens on etcd's own ports 2379 and 2380. Plain HTTP only.
	Hosts []string
	// Cgroups, when set, start member i's process in the cgroup v2
	// directory Cgroups[i] (created when missing; "" for none), so that
	// rules matched on a cgroup (a local environment's distance or
	// partition) apply to it from its first packet.
	Cgroups []string
}

// Member is one etcd process.
type Member struct {
	Name string
	// ClientURL is where the member listens for clients.
	ClientURL string
	// AdvertisedClientURL is the client URL in the member list: ClientURL,
	// or its proxy's URL.
	AdvertisedClientURL string
	// Proxy in front of the client port (Options.Proxied).
	Proxy   *Proxy
	PeerURL string
	DataDir string
	dir     string
	binary  string
	env     []string
	cgroup  string
	args    []string
	cmd     *exec.Cmd
	done    chan struct{}
	// stopped is set by Stop: a member whose process exited without it
	// died on its own (a port taken, bad flags, a crash).
	stopped bool
}

// Cluster is a running etcd cluster.
type Cluster struct {
	Members []*Member
	// TLS material for clients, when Options.CA was set.
	CA     *pki.CA
	Client *pki.Leaf
	// maxRequestBytes is --max-request-bytes when ExtraArgs raise it.
	maxRequestBytes int
	t               testing.TB
}

// Start starts a cluster, waits until every member is healthy and stops it
// when the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	testenv.SkipIfShort(t, "etcd processes")
	if o.Members == 0 {
		o.Members = 3
	}
	if o.Name == "" {
		o.Name = "etcd"
	}
	if (len(o.Hosts) > 0 && len(o.Hosts) != o.Members) || (len(o.Cgroups) > 0 && len(o.Cgroups) != o.Members) {
		t.Fatalf("etcdtest: %d members, %d hosts, %d cgroups: give one per member or none", o.Members, len(o.Hosts), len(o.Cgroups))
	}
	if len(o.Hosts) > 0 && o.CA != nil {
		t.Fatal("etcdtest: Hosts works with plain HTTP only")
	}
	scheme := "http"
	if o.CA != nil {
		scheme = "https"
	}
	c := &Cluster{CA: o.CA, t: t}
	for _, a := range o.ExtraArgs {
		if v, ok := strings.CutPrefix(a, "--max-request-bytes="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("etcdtest: %s: %v", a, err)
			}
			c.maxRequestBytes = n
		}
	}
	var initial []string
	for i := range o.Members {
		m := &Member{Name: fmt.Sprintf("%s-%d", o.Name, i), dir: t.TempDir(), binary: o.Binary, env: o.Env}
		if len(o.Hosts) > 0 {
			m.PeerURL = fmt.Sprintf("%s://%s:2380", scheme, o.Hosts[i])
			m.ClientURL = fmt.Sprintf("%s://%s:2379", scheme, o.Hosts[i])
		} else {
			m.PeerURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, testenv.FreePort(t))
			m.ClientURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, testenv.FreePort(t))
		}
		if len(o.Cgroups) > 0 {
			m.cgroup = o.Cgroups[i]
		}
		m.DataDir = filepath.Join(m.dir, "data")
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.Members = append(c.Members, m)
	}
	if o.CA != nil {
		leaf, err := o.CA.IssueClient("etcdtest-client", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		c.Client = leaf
	}
	if o.Proxied && o.CA != nil {
		t.Fatal("etcdtest: Proxied works with plain HTTP only")
	}
	for _, m := range c.Members {
		m.AdvertisedClientURL = m.ClientURL
		if o.Proxied {
			m.Proxy = StartProxy(t, strings.TrimPrefix(m.ClientURL, "http://"))
			m.AdvertisedClientURL = "http://" + m.Proxy.Addr
		}
		m.args = append([]string{
			"--name=" + m.Name, "--data-dir=" + m.DataDir,
			"--listen-peer-urls=" + m.PeerURL, "--initial-advertise-peer-urls=" + m.PeerURL,
			"--listen-client-urls=" + m.ClientURL, "--advertise-client-urls=" + m.AdvertisedClientURL,
			"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=new",
			"--initial-cluster-token=etcdtest-" + strconv.Itoa(os.Getpid()),
			"--log-level=error",
		}, o.ExtraArgs...)
		if o.CA != nil {
			m.args = append(m.args, c.tlsArgs(t, m)...)
		}
		c.startMember(m)
	}
	// WaitHealthy skips a member that is not running: one that died at its
	// start (a port taken before it bound it) would leave a cluster of
	// none, or of fewer members than asked, called healthy.
	err := c.WaitHealthy(context.Background(), time.Minute)
	for _, m := range c.Members {
		if died := m.died(); died != nil {
			t.Fatalf("etcdtest: %v", died)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FreeURL is http://127.0.0.1:<free port>.
func FreeURL(t testing.TB) string { return fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t)) }

// FreePort is a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort(t testing.TB) int { t.Helper(); return testenv.FreePort(t) }
