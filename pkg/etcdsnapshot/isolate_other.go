//go:build !linux

package etcdsnapshot

import "syscall"

func childProcAttr() *syscall.SysProcAttr { return nil }
