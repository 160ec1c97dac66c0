package localenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// SupervisorInfo is run/supervisor.json: who runs the environment and
// where its control socket is.
type SupervisorInfo struct {
	PID        int        `json:"pid"`
	StartTicks uint64     `json:"startTicks"`
	Socket     string     `json:"socket"`
	Started    time.Time  `json:"started"`
	Ready      *time.Time `json:"ready,omitempty"`
	Error      string     `json:"error,omitempty"`
	// SharedSourceAddress is Env.SharedSourceAddress once ready: "" when
	// pods connect from their own address, else why not and what that
	// means.
	SharedSourceAddress string `json:"sharedSourceAddress,omitempty"`
}

// Alive reports whether the supervisor process still runs.
func (i SupervisorInfo) Alive() bool {
	return proc.PIDRecord{PID: i.PID, StartTicks: i.StartTicks}.Alive()
}

func supervisorPath(dir string) string { return filepath.Join(dir, "run", "supervisor.json") }

// ReadSupervisor reads run/supervisor.json of a state directory.
func ReadSupervisor(dir string) (SupervisorInfo, error) {
	var info SupervisorInfo
	data, err := os.ReadFile(supervisorPath(dir))
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(data, &info)
}

func writeSupervisor(dir string, info SupervisorInfo) error {
	data, _ := json.MarshalIndent(info, "", "  ")
	if err := os.MkdirAll(filepath.Dir(supervisorPath(dir)), 0o755); err != nil {
		return err
	}
	tmp := supervisorPath(dir) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, supervisorPath(dir))
}

// controlSocket is run/control.sock, or an abstract socket named after the
// state directory when that path is too long for a unix socket.
func controlSocket(dir string) string {
	p := filepath.Join(dir, "run", "control.sock")
	if len(p) < 100 {
		return p
	}
	sum := sha256.Sum256([]byte(dir))
	return "@etcdfed-localenv-" + hex.EncodeToString(sum[:8])
}

// Supervise runs an environment until ctx is done or a client asks it to
// shut down: it records itself in run/supervisor.json, serves the control
// socket (status, fail-zone, restore-zone, partition, distance,
// shutdown), starts the
// environment, calls ready, and stops everything on the way out.
func Supervise(ctx context.Context, cfg Config, ready func(*Env)) (err error) {
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return err
	}
	cfg.StateDir = dir
	ctx, shutdown := context.WithCancel(ctx)
	defer shutdown()
	ctl, err := listenControl(dir, shutdown)
	if err != nil {
		return err
	}
	defer ctl.close()

	env, err := Start(ctx, cfg)
	if err != nil {
		ctl.info.Error = err.Error()
		_ = writeSupervisor(dir, ctl.info)
		return err
	}
	if err := ctl.ready(env); err != nil {
		_ = env.Stop()
		return err
	}
	if ready != nil {
		ready(env)
	}
	<-ctx.Done()
	ctl.srv.setEnv(nil)
	return env.Stop()
}

// ServeControl serves the control socket of an environment this process
// started with Start, as Supervise does for its own, so that `etcdfed dev`
// commands and `etcdfed drill` reach it through its state directory (the
// tests run the CLI against their environment this way). A shutdown
// request is refused: the caller owns the environment's life. stop removes
// the socket and run/supervisor.json; it does not stop the environment.
func ServeControl(env *Env) (stop func(), err error) {
	dir, err := filepath.Abs(env.cfg.StateDir)
	if err != nil {
		return nil, err
	}
	ctl, err := listenControl(dir, nil)
	if err != nil {
		return nil, err
	}
	if err := ctl.ready(env); err != nil {
		ctl.close()
		return nil, err
	}
	return ctl.close, nil
}

// control is a served control socket and the supervisor record that
// names it.
type control struct {
	dir  string
	info SupervisorInfo
	srv  *controlServer
	hs   *http.Server
}

// listenControl records this process as the supervisor of the state
// directory dir and serves its control socket; shutdown (nil: refused)
// is what a shutdown request calls.
func listenControl(dir string, shutdown func()) (*control, error) {
	if info, err := ReadSupervisor(dir); err == nil && info.Alive() && info.PID != os.Getpid() {
		return nil, fmt.Errorf("localenv: %s already runs under pid %d (`etcdfed dev down` stops it)", dir, info.PID)
	}
	info := SupervisorInfo{PID: os.Getpid(), StartTicks: proc.StartTicks(os.Getpid()), Socket: controlSocket(dir), Started: time.Now()}
	if err := writeSupervisor(dir, info); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(info.Socket, "@") {
		_ = os.Remove(info.Socket)
	}
	l, err := net.Listen("unix", info.Socket)
	if err != nil {
		_ = os.Remove(supervisorPath(dir))
		return nil, fmt.Errorf("localenv: control socket %s: %w", info.Socket, err)
	}
	c := &control{dir: dir, info: info, srv: &controlServer{shutdown: shutdown}}
	c.hs = &http.Server{Handler: c.srv.mux(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.hs.Serve(l) }()
	return c, nil
}

// ready hands the started environment to the control server and records
// it as ready.
func (c *control) ready(env *Env) error {
	c.srv.setEnv(env)
	now := time.Now()
	c.info.Ready = &now
	c.info.SharedSourceAddress = env.SharedSourceAddress()
	return writeSupervisor(c.dir, c.info)
}

func (c *control) close() {
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.hs.Shutdown(sctx)
	_ = os.Remove(supervisorPath(c.dir))
}

type controlServer struct {
	mu  sync.Mutex
	env *Env
	// shutdown is what a shutdown request calls; nil refuses it.
	shutdown func()
	faults   sync.Mutex // one fault operation at a time
}

func (s *controlServer) setEnv(e *Env) {
	s.mu.Lock()
	s.env = e
	s.mu.Unlock()
}

func (s *controlServer) getEnv(w http.ResponseWriter) *Env {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.env == nil {
		http.Error(w, "the environment is starting or stopping", http.StatusServiceUnavailable)
	}
	return s.env
}

func (s *controlServer) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /status", s.read(func(env *Env) any { return env.Status() }))
	m.HandleFunc("POST /fail-zone", s.fault(func(env *Env, r *http.Request) error {
		return env.FailZone(r.Context(), r.URL.Query().Get("name"), Mode(r.URL.Query().Get("mode")))
	}))
	m.HandleFunc("POST /restore-zone", s.fault(func(env *Env, r *http.Request) error {
		return env.RestoreZone(r.Context(), r.URL.Query().Get("name"))
	}))
	m.HandleFunc("POST /partition", s.fault(func(env *Env, r *http.Request) error {
		p, err := partitionFromQuery(r.URL.Query())
		if err != nil {
			return err
		}
		return env.Partition(r.Context(), p)
	}))
	m.HandleFunc("POST /heal-partition", s.fault(func(env *Env, r *http.Request) error {
		return env.HealPartition(r.Context())
	}))
	m.HandleFunc("GET /distance", s.read(func(env *Env) any {
		if st := env.distanceStatus(); st != nil {
			return st
		}
		return &DistanceStatus{Spec: PresetNone}
	}))
	m.HandleFunc("POST /distance", s.fault(func(env *Env, r *http.Request) error {
		d, err := ParseDistance(r.URL.Query().Get("spec"))
		if err != nil {
			return err
		}
		return env.SetDistance(r.Context(), d)
	}))
	m.HandleFunc("POST /shutdown", func(w http.ResponseWriter, _ *http.Request) {
		if s.shutdown == nil {
			http.Error(w, "this environment is run by the process that started it (a test), not by a supervisor: it stops when that process is done", http.StatusConflict)
			return
		}
		s.shutdown()
		w.WriteHeader(http.StatusAccepted)
	})
	return m
}

// read serves what get returns of the running environment, as JSON.
func (s *controlServer) read(get func(*Env) any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		env := s.getEnv(w)
		if env == nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(get(env))
	}
}

// fault serves a change of the running environment's faults (zones,
// partitions, distance), one at a time; an error is answered with 400
// Bad Request.
func (s *controlServer) fault(change func(*Env, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		env := s.getEnv(w)
		if env == nil {
			return
		}
		s.faults.Lock()
		defer s.faults.Unlock()
		if err := change(env, r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}
}

// ErrNotRunning says no supervisor runs the environment.
var ErrNotRunning = errors.New("localenv: the environment is not running")

// Client talks to a running environment's supervisor.
type Client struct {
	Info SupervisorInfo
	hc   *http.Client
}

// Connect returns a client for the supervisor of the environment in dir.
func Connect(dir string) (*Client, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	info, err := ReadSupervisor(abs)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, err
	}
	if !info.Alive() {
		return nil, fmt.Errorf("%w (its supervisor, pid %d, is gone)", ErrNotRunning, info.PID)
	}
	sock := info.Socket
	return &Client{Info: info, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}}, nil
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, out any) error {
	u := "http://localenv" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("localenv: supervisor (pid %d): %w", c.Info.PID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return errors.New(strings.TrimSpace(string(body)))
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// Status returns the environment's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	return s, c.do(ctx, http.MethodGet, "/status", nil, &s)
}

// FailZone fails a zone or member cluster.
func (c *Client) FailZone(ctx context.Context, name string, mode Mode) error {
	return c.do(ctx, http.MethodPost, "/fail-zone", url.Values{"name": {name}, "mode": {string(mode)}}, nil)
}

// RestoreZone restores a zone or member cluster.
func (c *Client) RestoreZone(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, "/restore-zone", url.Values{"name": {name}}, nil)
}

// Partition partitions the environment (Env.Partition).
func (c *Client) Partition(ctx context.Context, p Partition) error {
	return c.do(ctx, http.MethodPost, "/partition", partitionQuery(p), nil)
}

// HealPartition heals it (Env.HealPartition).
func (c *Client) HealPartition(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/heal-partition", nil, nil)
}

// SetDistance sets the distance between units (Env.SetDistance).
func (c *Client) SetDistance(ctx context.Context, d Distance) error {
	return c.do(ctx, http.MethodPost, "/distance", url.Values{"spec": {d.String()}}, nil)
}

// Distance returns the distance in place.
func (c *Client) Distance(ctx context.Context) (DistanceStatus, error) {
	var s DistanceStatus
	return s, c.do(ctx, http.MethodGet, "/distance", nil, &s)
}

// partitionQuery and partitionFromQuery carry a Partition in the CLI's
// syntax: groups=a,b|c and one-way=from>to (repeated).
func partitionQuery(p Partition) url.Values {
	q := url.Values{}
	if len(p.Groups) > 0 {
		gs := make([]string, len(p.Groups))
		for i, g := range p.Groups {
			gs[i] = strings.Join(g, ",")
		}
		q.Set("groups", strings.Join(gs, "|"))
	}
	for _, c := range p.OneWay {
		q.Add("one-way", c.From+">"+c.To)
	}
	return q
}

func partitionFromQuery(q url.Values) (Partition, error) {
	var p Partition
	var err error
	if p.Groups, err = ParseGroups(q.Get("groups")); err != nil {
		return p, err
	}
	for _, v := range q["one-way"] {
		c, err := ParseCut(v)
		if err != nil {
			return p, err
		}
		p.OneWay = append(p.OneWay, c)
	}
	return p, nil
}

// Shutdown asks the supervisor to stop the environment and waits until
// its process is gone.
func (c *Client) Shutdown(ctx context.Context) error {
	if err := c.do(ctx, http.MethodPost, "/shutdown", nil, nil); err != nil {
		return err
	}
	for c.Info.Alive() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
