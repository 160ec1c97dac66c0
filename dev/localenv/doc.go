// Package localenv runs etcdfed's whole topology on one machine without
// Docker: a hub cluster and N member clusters as real kube-apiservers (each
// with its own etcd), a node agent per member cluster that plays kubelet,
// scheduler and volume provisioner and runs pods as local processes on
// their own loopback addresses (package nodeagent), the hub and spoke
// processes when their binaries exist, and fault injection: a zone or a
// whole member cluster can be killed (processes killed, apiserver stopped
// when the whole cluster goes) or partitioned (iptables rules on the zone's
// or cluster's loopback block, matched per cgroup; root only), and
// distance between zones and clusters (round trip, jitter, loss; see
// Distance): their traffic redirected through a delaying proxy
// (package delayproxy) by nat rules matched the same way.
//
// Start an environment with Start and stop it with Env.Stop; `etcdfed dev
// up` runs the same thing under a supervisor (Supervise) that serves a
// control socket in the state directory, so that `etcdfed dev status`,
// `fail-zone`, `restore-zone` and `down` work from any shell. Everything an
// environment owns lives in its state directory:
//
//	state.json              topology, slot and every address (reused by the next start)
//	pki/                    CA, apiserver serving certificates, admin client certificate, service-account key
//	kubeconfigs/<c>.yaml    admin kubeconfig of every cluster (hub.yaml, member-1.yaml, ...)
//	kubeconfigs/members/    the member clusters' kubeconfigs only (a file-based provider reads this)
//	clusters/<c>/etcd/      the data of the etcd behind cluster c's apiserver
//	clusters/<c>/node/      the node agent's volumes/ (one directory per PV), pods/ (Secret,
//	                        ConfigMap and emptyDir contents) and logs/pods/ (container output)
//	logs/                   apiserver, etcd, component and supervisor logs
//	run/pids/               one pid file per live process (pid + kernel start time)
//	run/supervisor.json     the supervisor's pid and control socket
//	run/control.sock        the control socket
//
// Addresses follow package addr: the environment holds one slot, a
// 127.<slot>.0.0/16 block.
package localenv
