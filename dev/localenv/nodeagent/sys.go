package nodeagent

import (
	"context"
	"syscall"
)

const sigTERM = syscall.SIGTERM

func sigName(i int) string { return syscall.Signal(i).String() }

func contextWithCancel(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(parent)
}
