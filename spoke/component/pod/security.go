package pod

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The user and group every container of a member pod runs as, and the
// group that owns the data volume: distroless's nonroot, the user of
// etcdfed's own images. etcd's official image runs as root and creates its
// data directory 0700, which the helper init containers (prepare-data
// before every start, a restore) could then not read; with one user for
// every container, etcd, wait-dns and prepare-data read and write the same
// files. fsGroup makes the kubelet give the volume to the group (group
// read-write, setgid directories), which also opens a volume written by
// root before (an etcd run as root by an earlier etcdfed) to the user.
const (
	RunAsUser  int64 = 65532
	RunAsGroup int64 = 65532
	FSGroup    int64 = 65532
)

// podSecurityContext runs every container as RunAsUser (never root), gives
// the volumes to FSGroup (changing their ownership only when the volume's
// root does not match yet: a large data volume is not walked at every
// start) and filters system calls with the runtime's default seccomp
// profile.
func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsUser:           ptr.To(RunAsUser),
		RunAsGroup:          ptr.To(RunAsGroup),
		RunAsNonRoot:        ptr.To(true),
		FSGroup:             ptr.To(FSGroup),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurityContext takes every privilege away: no capabilities,
// no privilege escalation (setuid binaries), a read-only root filesystem.
// etcd writes only its data volume; the helpers write only the data volume
// (a restore downloads the snapshot into it) and read the mounted Secrets.
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
		Privileged:               ptr.To(false),
	}
}
