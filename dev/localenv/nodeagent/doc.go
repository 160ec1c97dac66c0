// Package nodeagent is the local environment's stand-in for kubelet, the
// scheduler and a volume provisioner in one member cluster.
//
// An Agent registers Node objects (Ready, labelled with their zone, a
// loopback InternalIP), binds pending pods to a node that satisfies their
// node selector, required node affinity and volume topology, provisions
// PersistentVolumeClaims as directories (WaitForFirstConsumer: the volume is
// created in the zone of the node the first pod using it is bound to), and
// runs every pod bound to its nodes as local processes:
//
//   - command[0]'s base name picks the binary in the bin directory
//     (/usr/local/bin/etcd runs bin/etcd); without a command, the image
//     name's last path element does (registry.k8s.io/etcd:3.6 runs bin/etcd);
//     any other command fails the container with reason
//     CreateContainerError and a message naming what was looked for;
//   - an image tag that names a release (etcd:v3.5.35, etcd:3.6.16-0) runs
//     that release: bin/etcd-3.5.35 when it exists, else bin/etcd when its
//     --version reports that release; any other release fails the container
//     with CreateContainerError naming the release asked for and the one
//     bin/ has (release.go), as a pull of a missing tag would;
//   - each pod gets its own loopback address as pod IP, and, given
//     Config.Cgroup, a cgroup of its own below its zone's that every one of
//     its processes starts in; Config.Network can then make the pod's
//     connections come from its address;
//   - volumes (persistentVolumeClaim, secret, configMap, emptyDir) become
//     directories, and container paths under a mountPath are rewritten to
//     them in the command, args, env values and working directory (path
//     mapping, no mount namespaces, so no root is needed);
//   - env supports value, fieldRef (metadata.name, metadata.namespace,
//     metadata.uid, spec.nodeName, spec.serviceAccountName, status.podIP,
//     status.hostIP, metadata.labels/annotations), secretKeyRef,
//     configMapKeyRef and envFrom, with kubelet's $(VAR) expansion in env
//     values, command and args;
//   - ETCDFED_DNS_SERVERS points the process's resolver at the cluster DNS
//     (see internal/resolverenv);
//   - init containers run to completion in order; httpGet, tcpSocket and
//     exec probes run against the pod IP (startup gates liveness and
//     readiness; liveness failures restart; readiness sets Ready);
//     restartPolicy with kubelet's back-off (0, base, 2*base, ... max);
//     terminationGracePeriodSeconds (an exec preStop hook first, within
//     the grace, then SIGTERM, then SIGKILL; kubelet's 2 s extension
//     when the hook used the grace up);
//   - status: phase, pod and host IP, conditions, container states,
//     restart counts;
//   - securityContext (runAsUser, fsGroup, capabilities, seccomp, a
//     read-only root) and resources are accepted and not enforced: every
//     process runs as the agent's user, and a volume is a directory the
//     agent owns, so no ownership change is needed for fsGroup.
//
// It also plays the controllers a kind cluster would run for these
// objects: pvc-protection and pv-protection finalizers, and reclaiming
// (Delete: directory and PV removed; Retain: PV Released) the volumes it
// provisioned.
//
// FailZone and RestoreZone simulate the loss of a zone's nodes: processes
// are killed, the nodes turn Ready=Unknown with the unreachable taints the
// node lifecycle controller would add, and nothing is scheduled there until
// the zone is restored, when the pods' containers start again.
package nodeagent
