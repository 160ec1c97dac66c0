package realnode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are bind-mounted (the
// directory `ip netns` uses), so that `ip netns exec NAME` reaches them too.
const NetnsDir = "/run/netns"

// NetnsPath is the file of a named network namespace.
func NetnsPath(name string) string { return filepath.Join(NetnsDir, name) }

// IP runs the ip command (iproute2) and returns its error with its output.
func IP(args ...string) error {
	path, err := exec.LookPath("ip")
	if err != nil {
		return errors.New("ip (iproute2) not found: hack/system-deps.sh realnodes installs it")
	}
	var out bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// CreateNetns creates a named network namespace with its loopback up; an
// existing one of that name is deleted first (left by a run that crashed).
func CreateNetns(name string) error {
	if NetnsExists(name) {
		if err := DeleteNetns(name); err != nil {
			return err
		}
	}
	if err := IP("netns", "add", name); err != nil {
		return err
	}
	return IP("-n", name, "link", "set", "lo", "up")
}

// NetnsExists reports whether the named namespace's file exists.
func NetnsExists(name string) bool {
	_, err := os.Stat(NetnsPath(name))
	return err == nil
}

// DeleteNetns removes a named network namespace (its interfaces go when
// the last process in it exits).
func DeleteNetns(name string) error {
	if !NetnsExists(name) {
		return nil
	}
	return IP("netns", "delete", name)
}

// ListNetns lists the named network namespaces whose names start with
// prefix.
func ListNetns(prefix string) []string {
	ents, _ := os.ReadDir(NetnsDir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// Sysctl sets a sysctl inside a named network namespace (the net.* keys
// are per namespace).
func Sysctl(netns, key, value string) error {
	return InNetns(netns, func() error {
		p := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
		if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, netns, err)
		}
		return nil
	})
}

// InNetns runs fn on an OS thread switched into the named network
// namespace: sockets fn opens, and files under /proc/sys/net it writes,
// belong to that namespace. The thread is discarded afterwards.
func InNetns(name string, fn func() error) error {
	return InNetnsPath(NetnsPath(name), fn)
}

// InNetnsPath is InNetns for a namespace named by its path (a bind mount
// or /proc/PID/ns/net).
func InNetnsPath(path string, fn func() error) error {
	name := path
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", name, err)
	}
	defer f.Close()
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread, now in another namespace, exits
		// with this goroutine instead of running other goroutines.
		runtime.LockOSThread()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// SameNetns reports whether this process's network namespace is the named
// one.
func SameNetns(name string) bool {
	var a, b unix.Stat_t
	if unix.Stat("/proc/self/ns/net", &a) != nil || unix.Stat(NetnsPath(name), &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// ExecInNetns replaces this process with argv[0] (this binary, re-run)
// inside the named network namespace, with env. It returns only on error.
func ExecInNetns(name string, argv, env []string) error {
	f, err := os.Open(NetnsPath(name))
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", name, err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// setns changes the calling thread only; execve keeps that thread's
	// namespaces for the new program.
	runtime.LockOSThread()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter network namespace %s: %w", name, err)
	}
	return syscall.Exec(self, argv, env)
}

// KeepFDOnExec clears FD_CLOEXEC so that fd survives an exec.
func KeepFDOnExec(fd uintptr) error {
	_, err := unix.FcntlInt(fd, unix.F_SETFD, 0)
	return err
}

// itoa is strconv.Itoa.
func itoa(i int) string { return strconv.Itoa(i) }
