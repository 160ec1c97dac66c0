package pod

import (
	"fmt"
	"strconv"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
	"github.com/etcdfed/etcdfed/spoke/internal/spec"
)

// Paths inside the etcd container.
const (
	EtcdCommand   = "/usr/local/bin/etcd"
	DataMountPath = "/var/lib/etcd"
	DataDir       = DataMountPath + "/data"
	TLSMountPath  = "/etc/etcd/tls"
	CAFile        = TLSMountPath + "/ca.crt"
	CertFile      = TLSMountPath + "/tls.crt"
	KeyFile       = TLSMountPath + "/tls.key"
	// CRLFile is the ring's revocation list (etcdfedv1.RevocationListKey
	// of the member's Secret).
	CRLFile = TLSMountPath + "/" + etcdfedv1.RevocationListKey
	// StoreCredentialsMountPath holds the restore's store credentials.
	StoreCredentialsMountPath = "/etc/etcdfed/store"
)

// Environment variables set in the member's containers from the downward
// API or by the spoke.
const (
	EnvPodIP           = "POD_IP"
	EnvExpectedAddress = "EXPECTED_ADDRESS"
)

// EtcdArgs renders etcd's flags for the member, advertising its DNS name
// with the exposed ports adv. etcd listens on the pod IP only (the local
// environment runs every pod on its own loopback address of one host, where
// 0.0.0.0 would collide); health probes use the plain-HTTP metrics listener.
// Bootstrap flags are rendered only when spec.bootstrap is set. A flag
// whose name depends on the etcd version is spelled the way the member's
// version takes it (pkg/etcdversion.FlagName): etcd 3.7 refuses to start
// with an --experimental-* name 3.6 graduated.
func EtcdArgs(m *etcdfedv1.EtcdMember, adv spec.Ports) []string {
	scheme := spec.Scheme(m)
	version := spec.EtcdVersion(m)
	args := []string{
		"--name=" + m.Spec.MemberName,
		"--data-dir=" + DataDir,
		fmt.Sprintf("--listen-peer-urls=%s://$(%s):%d", scheme, EnvPodIP, spec.PeerPort),
		fmt.Sprintf("--listen-client-urls=%s://$(%s):%d", scheme, EnvPodIP, spec.ClientPort),
		fmt.Sprintf("--listen-metrics-urls=http://$(%s):%d", EnvPodIP, spec.MetricsPort),
		"--initial-advertise-peer-urls=" + spec.PeerURL(m, adv),
		"--advertise-client-urls=" + spec.ClientURL(m, adv),
	}
	if b := m.Spec.Bootstrap; b != nil {
		args = append(args,
			"--initial-cluster="+b.InitialCluster,
			"--initial-cluster-state="+string(b.InitialClusterState),
			"--initial-cluster-token="+b.Token,
		)
	}
	if m.Spec.ForceNewCluster != "" {
		// Quorum-loss recovery: a one-member cluster from this member's
		// own data. The hub clears the field once etcd answers as one
		// member, which restarts the pod without the flag.
		args = append(args, "--force-new-cluster")
	}
	args = append(args,
		"--heartbeat-interval="+strconv.Itoa(int(spec.HeartbeatMillis(m))),
		"--election-timeout="+strconv.Itoa(int(spec.ElectionMillis(m))),
	)
	if name := etcdversion.FlagName(version, etcdversion.FlagMaxLearners); name != "" {
		args = append(args, "--"+name+"=1") // 3.5 has no flag: one learner is its fixed limit
	}
	if q := m.Spec.Etcd.QuotaBackendBytes; q != nil {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(q.Value(), 10))
	}
	if mode := m.Spec.Etcd.AutoCompactionMode; mode != "" {
		args = append(args, "--auto-compaction-mode="+string(mode))
		if r := m.Spec.Etcd.AutoCompactionRetention; r != "" {
			args = append(args, "--auto-compaction-retention="+r)
		}
	}
	if spec.TLSEnabled(m) {
		args = append(args,
			"--cert-file="+CertFile,
			"--key-file="+KeyFile,
			"--trusted-ca-file="+CAFile,
			"--client-cert-auth=true",
			"--peer-cert-file="+CertFile,
			"--peer-key-file="+KeyFile,
			"--peer-trusted-ca-file="+CAFile,
			"--peer-client-cert-auth=true",
		)
		if t := m.Spec.TLS; t.RequirePeerName && t.PeerName != "" {
			// Peers only: the peer port (both ends of every peer
			// connection) accepts a certificate only with the ring's
			// peer name, which no client certificate carries. The same
			// flag on etcd 3.5, 3.6 and 3.7.
			args = append(args, "--peer-cert-allowed-hostname="+t.PeerName)
		}
		if m.Spec.TLS.RevocationList {
			// Client certificates the ring revoked are refused at the
			// handshake; etcd reads the file on every client connection,
			// so a rewritten Secret takes effect without a restart.
			args = append(args, "--client-crl-file="+CRLFile)
		}
		if m.Spec.TLS.PeerRevocationList {
			// Peer certificates the hub superseded (a renewed member's
			// old one, an earlier incarnation's) are refused by the peer
			// port, from the same file, read on every connection it
			// accepts.
			args = append(args, "--peer-crl-file="+CRLFile)
		}
		if name := etcdversion.FlagName(version, etcdversion.FlagPeerSkipClientSANVerification); m.Spec.TLS.PeerSkipClientSANVerification && name != "" {
			args = append(args, "--"+name+"=true")
		}
	}
	return args
}
