//go:build tools

// Package tools records the binaries this module builds: containerd, its
// runc shim and ctr, for the local environment's real nodes (kubelet 1.36
// needs containerd 2; Debian 12 has 1.6).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
