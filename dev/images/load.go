package images

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Containerd says how to reach one containerd with its ctr client.
type Containerd struct {
	// Ctr is the ctr binary; empty: "ctr" on PATH.
	Ctr string
	// Address is containerd's socket. Required: never the machine's
	// default socket by accident.
	Address string
	// Namespace is containerd's namespace; empty: k8s.io, the one the
	// CRI plugin (the kubelet's) uses.
	Namespace string
	// Snapshotter unpacks the images; empty: containerd's default.
	Snapshotter string
}

// KubernetesNamespace is the containerd namespace of the CRI plugin.
const KubernetesNamespace = "k8s.io"

func (c Containerd) command(ctx context.Context, args ...string) *exec.Cmd {
	bin := c.Ctr
	if bin == "" {
		bin = "ctr"
	}
	ns := c.Namespace
	if ns == "" {
		ns = KubernetesNamespace
	}
	return exec.CommandContext(ctx, bin, append([]string{"--address", c.Address, "--namespace", ns}, args...)...)
}

// Run runs ctr with args against this containerd and returns its
// standard output; the error holds its standard error.
func (c Containerd) Run(ctx context.Context, args ...string) (string, error) {
	if c.Address == "" {
		return "", fmt.Errorf("containerd address is required")
	}
	cmd := c.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Load imports OCI image tarballs (WriteTar's) into containerd, unpacked
// so that a container can start from them at once (`ctr images import`).
func (c Containerd) Load(ctx context.Context, tarballs ...string) error {
	for _, t := range tarballs {
		args := []string{"images", "import"}
		if c.Snapshotter != "" {
			args = append(args, "--snapshotter", c.Snapshotter)
		}
		if _, err := c.Run(ctx, append(args, t)...); err != nil {
			return fmt.Errorf("load %s: %w", t, err)
		}
	}
	return nil
}
