package realnode

import "golang.org/x/sys/unix"

type syscallStatfs = unix.Statfs_t

func statfs(path string, st *syscallStatfs) error { return unix.Statfs(path, st) }

func isCgroup2(st *syscallStatfs) bool { return st.Type == unix.CGROUP2_SUPER_MAGIC }

func killPID(pid int) error { return unix.Kill(pid, unix.SIGKILL) }
