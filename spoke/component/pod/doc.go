// Package pod is the spoke component for a member's pod: Build renders the
// pod from the EtcdMember (EtcdArgs renders etcd's flags) and Decide says
// what to do about the pod that exists. Both are pure; spoke/member reads
// and writes.
//
// The pod runs within the subset of the pod API the local environment's node
// agent implements, so the same pod runs on a real kubelet and locally:
// command (its first element's basename names the binary), env with values
// and downward-API fieldRefs, $(VAR) expansion, PVC and Secret volumes, init
// containers, httpGet and tcpSocket probes (probes.go), and a termination
// message taken from the log (FallbackToLogsOnError, for prepare-data).
// The security contexts (security.go) and the resources (harden, with
// spec's defaults) are what a real kubelet needs; the node agent accepts
// them without enforcing them.
package pod
