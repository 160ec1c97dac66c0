//go:build tools

// Package tools records the binaries this module builds besides cmd/etcd.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
)
