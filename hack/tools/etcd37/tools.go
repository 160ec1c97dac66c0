//go:build tools

// Package tools records the binaries this module builds besides cmd/.
package tools

import (
	_ "go.etcd.io/etcd/etcdutl/v3"
)
