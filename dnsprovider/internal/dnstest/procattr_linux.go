package dnstest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd when the test binary dies, so a
// test killed by its timeout leaves no named behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
