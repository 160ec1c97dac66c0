//go:build linux

package etcdsnapshot

import "syscall"

// childProcAttr kills the checking child when its parent dies.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
