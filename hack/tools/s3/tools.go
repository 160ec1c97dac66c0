//go:build tools

// Package tools records the binaries this module builds.
package tools

import (
	_ "github.com/versity/versitygw/cmd/versitygw"
)
