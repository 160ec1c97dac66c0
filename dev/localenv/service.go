package localenv

import (
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// service keeps one process running: it restarts it with back-off when it
// exits (if restart is set) until Stop.
type service struct {
	name    string
	spec    func() proc.Spec
	restart bool
	log     logr.Logger

	mu       sync.Mutex
	p        *proc.Process
	now      bool // the next restart skips the back-off (set by Kill(true))
	restarts int
	lastExit string
	stopping bool
	grace    time.Duration
	stopCh   chan struct{}
	done     chan struct{}
	started  chan struct{} // closed after the first start attempt
	startErr error
}

func startService(name string, spec func() proc.Spec, restart bool, log logr.Logger) (*service, error) {
	s := &service{name: name, spec: spec, restart: restart, log: log.WithValues("process", name),
		stopCh: make(chan struct{}), done: make(chan struct{}), started: make(chan struct{})}
	go s.loop()
	<-s.started
	if s.startErr != nil {
		<-s.done
		return nil, s.startErr
	}
	return s, nil
}

func (s *service) loop() {
	defer close(s.done)
	backoff := time.Second
	first := true
	for {
		p, err := proc.Start(s.spec())
		if err == nil {
			// Before started is closed: Info gives the pid as soon as
			// startService returns.
			s.mu.Lock()
			s.p = p
			s.mu.Unlock()
		}
		if first {
			first = false
			s.startErr = err
			close(s.started)
			if err != nil {
				return
			}
		}
		if err != nil {
			s.log.Error(err, "Restarting failed")
		} else {
			s.mu.Lock()
			s.p = p
			s.mu.Unlock()
			select {
			case <-p.Done():
				code, sig, _ := p.Exit()
				s.mu.Lock()
				s.lastExit = exitString(code, sig)
				s.mu.Unlock()
				if p.Started().Add(time.Minute).Before(time.Now()) {
					backoff = time.Second
				}
			case <-s.stopCh:
				s.mu.Lock()
				g := s.grace
				s.mu.Unlock()
				p.Stop(g)
				return
			}
		}
		if !s.restart {
			return
		}
		s.mu.Lock()
		wait, now := backoff, s.now
		s.now = false
		s.mu.Unlock()
		if now {
			// A replaced pod, not a crash: no back-off, and none owed.
			wait, backoff = 0, time.Second/2
		}
		s.log.Info("Process exited, restarting", "after", wait.String(), "exit", s.lastExit)
		select {
		case <-s.stopCh:
			return
		case <-time.After(wait):
		}
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
		if backoff < 30*time.Second {
			backoff *= 2
		}
	}
}

func exitString(code int, sig string) string {
	if sig != "" {
		return "signal " + sig
	}
	return "exit code " + itoa(code)
}

// Stop stops the process (SIGTERM, SIGKILL after grace) and the restarts.
func (s *service) Stop(grace time.Duration) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.stopping, s.grace = true, grace
	s.mu.Unlock()
	close(s.stopCh)
	<-s.done
}

// halt stops the restarts and kills the process at once, without waiting
// for it (Exited is closed once it is gone).
func (s *service) halt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return
	}
	s.stopping, s.grace = true, 0
	close(s.stopCh)
}

// Exited is closed when the service gave up (no restart) or was stopped.
func (s *service) Exited() <-chan struct{} { return s.done }

// Info returns the current pid (0 when not running), restarts and the last
// exit.
func (s *service) Info() (pid, restarts int, lastExit string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		select {
		case <-s.p.Done():
		default:
			pid = s.p.PID()
		}
	}
	return pid, s.restarts, s.lastExit
}

// Kill SIGKILLs the running process. With restartNow false that is a crash:
// the service restarts it after its back-off, which doubles (up to 30s)
// while the process keeps dying within a minute of starting, as kubelet's
// does. With restartNow true it is a pod deleted and replaced: the new
// process starts at once and the back-off starts over. It returns the
// killed pid (0 if none).
func (s *service) Kill(restartNow bool) int {
	s.mu.Lock()
	p := s.p
	if restartNow {
		s.now = true
	}
	s.mu.Unlock()
	if p == nil {
		return 0
	}
	select {
	case <-p.Done():
		return 0
	default:
	}
	p.Kill()
	return p.PID()
}
