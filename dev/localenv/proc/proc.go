package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec describes one process.
type Spec struct {
	// Name identifies the process in its pid file and errors.
	Name string
	// Path is the executable; Args excludes it (argv[0] is Path).
	Path string
	Args []string
	// Env is the complete environment ("K=V").
	Env []string
	// Dir is the working directory; "" is the caller's.
	Dir string
	// LogPath receives stdout and stderr, appended. "" discards them.
	LogPath string
	// PIDFile, when set, is written after the start and removed after the
	// process is reaped.
	PIDFile string
	// Cgroup is the absolute path of a cgroup v2 directory to start the
	// process in; "" keeps the caller's cgroup.
	Cgroup string
}

// Process is a started process. Wait for it with Done.
type Process struct {
	spec    Spec
	cmd     *exec.Cmd
	pid     int
	started time.Time
	done    chan struct{}

	mu       sync.Mutex
	exitCode int
	signaled string
	waitErr  error
	exited   time.Time
}

// PIDRecord is the content of a pid file.
type PIDRecord struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// StartTicks is field 22 of /proc/<pid>/stat: together with the pid it
	// names one process for the life of the machine.
	StartTicks uint64 `json:"startTicks"`
	Path       string `json:"path"`
}

type startReq struct {
	cmd  *exec.Cmd
	resp chan error
}

var spawner struct {
	once sync.Once
	reqs chan startReq
}

// startLocked runs cmd.Start on one goroutine locked to an OS thread that
// never exits, so that Pdeathsig fires when this process dies and not when
// the Go runtime happens to retire the thread that forked.
func startLocked(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan startReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawner.reqs {
				r.resp <- r.cmd.Start()
			}
		}()
	})
	resp := make(chan error, 1)
	spawner.reqs <- startReq{cmd: cmd, resp: resp}
	return <-resp
}

// Start starts the process described by spec.
func Start(spec Spec) (*Process, error) {
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.SysProcAttr = attr
	var files []*os.File
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	if spec.LogPath != "" {
		if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o755); err != nil {
			return nil, fmt.Errorf("create log dir of %s: %w", spec.Name, err)
		}
		f, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open log of %s: %w", spec.Name, err)
		}
		files = append(files, f)
		cmd.Stdout, cmd.Stderr = f, f
	}
	if spec.Cgroup != "" {
		f, err := os.Open(spec.Cgroup)
		if err != nil {
			return nil, fmt.Errorf("open cgroup of %s: %w", spec.Name, err)
		}
		files = append(files, f)
		attr.UseCgroupFD = true
		attr.CgroupFD = int(f.Fd())
	}
	if err := startLocked(cmd); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", spec.Name, spec.Path, err)
	}
	p := &Process{spec: spec, cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), done: make(chan struct{})}
	if spec.PIDFile != "" {
		if err := writePIDFile(spec.PIDFile, PIDRecord{Name: spec.Name, PID: p.pid, StartTicks: StartTicks(p.pid), Path: spec.Path}); err != nil {
			p.Kill()
			<-p.done
			return nil, err
		}
	}
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	err := p.cmd.Wait()
	p.mu.Lock()
	p.exited = time.Now()
	p.waitErr = err
	p.exitCode = 0
	if st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case st.Exited():
			p.exitCode = st.ExitStatus()
		case st.Signaled():
			p.exitCode = 128 + int(st.Signal())
			p.signaled = st.Signal().String()
		}
	} else if err != nil {
		p.exitCode = -1
	}
	p.mu.Unlock()
	// Children the process left in its group die with it.
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	if p.spec.PIDFile != "" {
		_ = os.Remove(p.spec.PIDFile)
	}
	close(p.done)
}

// PID returns the process id (also its process group id).
func (p *Process) PID() int { return p.pid }

// Started returns when the process was started.
func (p *Process) Started() time.Time { return p.started }

// Done is closed once the process has exited and was reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit returns the exit code (128+signal when killed by a signal), the
// signal name if any, and when it exited. Valid after Done.
func (p *Process) Exit() (code int, signal string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.signaled, p.exited
}

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.pid, sig)
	}
}

// Kill sends SIGKILL to the process group without waiting.
func (p *Process) Kill() { p.Signal(syscall.SIGKILL) }

// Stop sends SIGTERM to the process group, waits up to grace, then sends
// SIGKILL, and returns once the process is reaped. A grace <= 0 kills at once.
func (p *Process) Stop(grace time.Duration) {
	if grace <= 0 {
		p.Kill()
		<-p.done
		return
	}
	p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.Kill()
		<-p.done
	}
}

func writePIDFile(path string, rec PIDRecord) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create pid dir: %w", err)
	}
	data, _ := json.Marshal(rec)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

// ReadPIDFile reads a pid file written by Start.
func ReadPIDFile(path string) (PIDRecord, error) {
	var rec PIDRecord
	data, err := os.ReadFile(path)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("parse pid file %s: %w", path, err)
	}
	return rec, nil
}

// Alive reports whether the process a record names still runs (same pid and
// same start time).
func (r PIDRecord) Alive() bool {
	if r.PID <= 0 {
		return false
	}
	t := StartTicks(r.PID)
	return t != 0 && t == r.StartTicks && !zombie(r.PID)
}

// zombie reports whether pid has exited and waits to be reaped: its
// /proc entry remains, the process does not.
func zombie(pid int) bool {
	f := statFields(pid)
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// StartTicks returns the start time of pid in clock ticks since boot, or 0
// when there is no such process.
func StartTicks(pid int) uint64 {
	f := statFields(pid)
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// PPID returns pid's parent, or 0 when there is no such process.
func PPID(pid int) int {
	f := statFields(pid)
	// f[1] is field 4 (ppid).
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// statFields returns the fields of /proc/PID/stat from field 3 (state)
// on, nil when there is no such process. The command name (field 2) may
// hold spaces and parentheses: the split is after the last ')'.
func statFields(pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// KillPIDFiles kills (SIGKILL, whole process group) every still-running
// process named by a pid file in dir and removes the files. It returns the
// records of the processes it killed. Processes whose pid was reused by an
// unrelated process are left alone.
func KillPIDFiles(dir string) ([]PIDRecord, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var killed []PIDRecord
	var errs []error
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pid") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		rec, err := ReadPIDFile(path)
		if err != nil {
			errs = append(errs, err)
			_ = os.Remove(path)
			continue
		}
		if rec.Alive() {
			_ = syscall.Kill(-rec.PID, syscall.SIGKILL)
			_ = syscall.Kill(rec.PID, syscall.SIGKILL)
			killed = append(killed, rec)
		}
		_ = os.Remove(path)
	}
	// Wait (bounded) until the killed processes are gone, so that their
	// ports and cgroups are free when this returns.
	deadline := time.Now().Add(10 * time.Second)
	for _, rec := range killed {
		for rec.Alive() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return killed, errors.Join(errs...)
}

// LivePIDFiles returns the records of the still-running processes named by
// pid files in dir.
func LivePIDFiles(dir string) ([]PIDRecord, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []PIDRecord
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pid") {
			continue
		}
		rec, err := ReadPIDFile(filepath.Join(dir, e.Name()))
		if err == nil && rec.Alive() {
			out = append(out, rec)
		}
	}
	return out, nil
}

// Memory returns the resident set size and the proportional set size of a
// process in bytes (PSS splits shared pages between the processes sharing
// them, so PSS values add up). Zero when unknown.
func Memory(pid int) (rss, pss uint64) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "Rss:":
			rss = v * 1024
		case "Pss:":
			pss = v * 1024
		}
	}
	return rss, pss
}
