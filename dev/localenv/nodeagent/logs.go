package nodeagent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// KubeletServing makes the agent serve the part of kubelet's API the
// apiserver uses for `pods/log` (GET /containerLogs/{namespace}/{pod}/
// {container}) on every node's IP, so that `kubectl logs` and clients of
// pods/log (the spoke reads etcd's log) work as on a real cluster. Point
// the apiserver at it with --kubelet-preferred-address-types=InternalIP,
// --kubelet-certificate-authority (the CA of Certificate) and
// --kubelet-client-certificate/-key (a certificate from ClientCAs); the
// port is published in each Node's status.daemonEndpoints.
type KubeletServing struct {
	// Port is the kubelet port on every node IP (kubelet's is 10250).
	Port int
	// Certificate is the serving certificate; it must name every node IP.
	Certificate tls.Certificate
	// ClientCAs verifies clients: only a client certificate from these
	// CAs (the apiserver's kubelet client certificate) is served.
	ClientCAs *x509.CertPool
}

// maxLogRead bounds what one request reads of a container's log file: the
// last 16 MiB. Older output of a long run is not served.
const maxLogRead = 16 << 20

// logPollInterval is how often a followed log is checked for new output.
const logPollInterval = 250 * time.Millisecond

// podLogDir is where the output of a pod's containers goes, one file per
// container (<container>.log), every run appended after a header line.
func (a *Agent) podLogDir(ns, name string, uid types.UID) string {
	return filepath.Join(a.cfg.StateDir, "logs", "pods", fmt.Sprintf("%s_%s_%s", ns, name, uid))
}

// serveKubelet serves the kubelet endpoint on every node IP until ctx is
// done.
func (a *Agent) serveKubelet(ctx context.Context) error {
	k := a.cfg.Kubelet
	tcfg := &tls.Config{
		Certificates: []tls.Certificate{k.Certificate},
		ClientCAs:    k.ClientCAs,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
	var servers []*http.Server
	for _, n := range a.nodeStates() {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(n.IP, uint16(k.Port)).String())
		if err != nil {
			for _, s := range servers {
				_ = s.Close()
			}
			return fmt.Errorf("nodeagent: kubelet endpoint of node %s: %w", n.Name, err)
		}
		mux := http.NewServeMux()
		node := n.Name
		mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
			a.serveContainerLog(w, r, node)
		})
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
		srv := &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(tls.NewListener(ln, tcfg)) }()
	}
	go func() {
		<-ctx.Done()
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	return nil
}

func (a *Agent) serveContainerLog(w http.ResponseWriter, r *http.Request, node string) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	q, err := parseLogQuery(r.URL.Query())
	if err != nil {
		logError(w, err.Error(), http.StatusBadRequest)
		return
	}
	if n, ok := a.node(node); !ok || n.failed {
		logError(w, fmt.Sprintf("node %s is down (its zone failed)", node), http.StatusServiceUnavailable)
		return
	}
	pod, err := a.pods.Pods(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		logError(w, fmt.Sprintf("pod %s/%s not found", ns, name), http.StatusNotFound)
		return
	case err != nil:
		logError(w, err.Error(), http.StatusInternalServerError)
		return
	case pod.Spec.NodeName != node:
		logError(w, fmt.Sprintf("pod %s/%s does not run on node %s", ns, name, node), http.StatusNotFound)
		return
	case !hasContainer(pod, container):
		logError(w, fmt.Sprintf("container %s is not valid for pod %s", container, name), http.StatusBadRequest)
		return
	}
	path := filepath.Join(a.podLogDir(ns, name, pod.UID), container+".log")
	data, size, err := readTail(path, maxLogRead)
	if errors.Is(err, os.ErrNotExist) {
		logError(w, fmt.Sprintf("container %q in pod %q is waiting to start", container, name), http.StatusBadRequest)
		return
	}
	if err != nil {
		logError(w, err.Error(), http.StatusInternalServerError)
		return
	}
	run, ok := containerRun(data, q.previous)
	if !ok {
		logError(w, fmt.Sprintf("previous terminated container %q in pod %q not found", container, name), http.StatusBadRequest)
		return
	}
	if q.tailLines != nil {
		run = tailLines(run, *q.tailLines)
	}
	budget := int64(-1)
	if q.limitBytes != nil {
		budget = *q.limitBytes
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	if !writeBudget(w, run, &budget) || !q.follow || q.previous {
		return
	}
	a.followLog(r.Context(), w, path, size, &budget, ns, name, pod.UID)
}

// followLog streams what is appended to path from offset until the
// container starts again (a new header line), the pod is gone, the budget
// is spent or the request ends.
func (a *Agent) followLog(ctx context.Context, w http.ResponseWriter, path string, offset int64, budget *int64, ns, name string, uid types.UID) {
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	t := time.NewTicker(logPollInterval)
	defer t.Stop()
	var partial []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Once the pod is gone, what its last run wrote before is still
		// sent (a stopping process's last lines), then the stream ends.
		p, err := a.pods.Pods(ns).Get(name)
		gone := err != nil || p.UID != uid
		f, err := os.Open(path)
		if err != nil {
			return
		}
		chunk, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, offset, maxLogRead), maxLogRead))
		_ = f.Close()
		if err != nil || len(chunk) == 0 {
			if gone {
				return
			}
			continue
		}
		offset += int64(len(chunk))
		data := append(partial, chunk...)
		// Only whole lines are checked for a header; keep the rest.
		cut := bytes.LastIndexByte(data, '\n') + 1
		lines, rest := data[:cut], data[cut:]
		partial = append([]byte(nil), rest...)
		if i := headerIndex(lines); i >= 0 {
			writeBudget(w, lines[:i], budget)
			return
		}
		if !writeBudget(w, lines, budget) || gone {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// logError answers with a Kubernetes Status, which the apiserver passes on
// and clients (kubectl, client-go) show with its message.
func logError(w http.ResponseWriter, msg string, code int) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Code: int32(code), Reason: metav1.StatusReasonBadRequest,
	}
	switch code {
	case http.StatusNotFound:
		st.Reason = metav1.StatusReasonNotFound
	case http.StatusServiceUnavailable:
		st.Reason = metav1.StatusReasonServiceUnavailable
	case http.StatusInternalServerError:
		st.Reason = metav1.StatusReasonInternalError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// readTail reads at most max bytes from the end of a file, starting at a
// line boundary when it did not read from the start, and returns them with
// the file's size.
func readTail(path string, limit int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := fi.Size()
	start := max(size-limit, 0)
	data := make([]byte, size-start)
	if _, err := f.ReadAt(data, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	if start > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return data, size, nil
}

// writeBudget writes data within the byte budget (negative: unlimited)
// and reports whether more may be written.
func writeBudget(w io.Writer, data []byte, budget *int64) bool {
	if *budget >= 0 && int64(len(data)) >= *budget {
		_, _ = w.Write(data[:*budget])
		*budget = 0
		return false
	}
	if _, err := w.Write(data); err != nil {
		return false
	}
	if *budget >= 0 {
		*budget -= int64(len(data))
	}
	return true
}

// logQuery is the part of kubelet's container log query the agent serves.
type logQuery struct {
	follow, previous      bool
	tailLines, limitBytes *int64
}

// parseLogQuery reads the query of a container log request. What the agent
// cannot do (timestamps: it keeps none per line; since: likewise; one
// stream of stdout and stderr apart: they share one file) is an error, not
// silently ignored.
func parseLogQuery(v url.Values) (logQuery, error) {
	var q logQuery
	var err error
	boolean := func(k string) bool {
		s := v.Get(k)
		if s == "" || err != nil {
			return false
		}
		b, perr := strconv.ParseBool(s)
		if perr != nil {
			err = fmt.Errorf("%s=%q: want true or false", k, s)
		}
		return b
	}
	number := func(k string) *int64 {
		s := v.Get(k)
		if s == "" || err != nil {
			return nil
		}
		n, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || n < 0 {
			err = fmt.Errorf("%s=%q: want a number >= 0", k, s)
			return nil
		}
		return &n
	}
	q.follow, q.previous = boolean("follow"), boolean("previous")
	q.tailLines, q.limitBytes = number("tailLines"), number("limitBytes")
	if boolean("timestamps") {
		return q, errors.New("timestamps=true: the local node keeps no per-line timestamps")
	}
	if v.Get("sinceSeconds") != "" || v.Get("sinceTime") != "" {
		return q, errors.New("sinceSeconds and sinceTime: the local node keeps no per-line timestamps; use tailLines")
	}
	if s := v.Get("stream"); s != "" && s != "All" {
		return q, fmt.Errorf("stream=%s: the local node keeps stdout and stderr in one stream (All)", s)
	}
	return q, err
}

// headerPrefix starts the line the agent writes before each start of a
// container (writeLogHeader): "--- <time>: start <n> (<command>) ---".
var headerPrefix = []byte("--- ")

// isHeader reports whether line (without its newline) is a start header.
func isHeader(line []byte) bool {
	return bytes.HasPrefix(line, headerPrefix) && bytes.Contains(line, []byte(": start ")) && bytes.HasSuffix(line, []byte(" ---"))
}

// headerIndex returns the offset of the first header line in data, or -1.
func headerIndex(data []byte) int {
	off := 0
	for off < len(data) {
		end := bytes.IndexByte(data[off:], '\n')
		line := data[off:]
		if end >= 0 {
			line = data[off : off+end]
		}
		if isHeader(line) {
			return off
		}
		if end < 0 {
			break
		}
		off += end + 1
	}
	return -1
}

// containerRun returns the output of the last run of a container (or,
// with previous, of the run before it) from its log file, without the
// header lines. A file without headers is one run. ok is false when there
// is no previous run.
func containerRun(data []byte, previous bool) ([]byte, bool) {
	// Offsets of the lines following each header.
	var starts, headers []int
	off := 0
	for off < len(data) {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		line := data[off:]
		if end >= 0 {
			next = off + end + 1
			line = data[off : off+end]
		}
		if isHeader(line) {
			headers = append(headers, off)
			starts = append(starts, next)
		}
		off = next
	}
	switch {
	case len(headers) == 0 && !previous:
		return data, true
	case len(headers) == 0 || (previous && len(headers) < 2):
		return nil, false
	case previous:
		n := len(headers)
		return data[starts[n-2]:headers[n-1]], true
	}
	return data[starts[len(starts)-1]:], true
}

// tailLines returns the last n lines of data (a last line without a
// newline counts).
func tailLines(data []byte, n int64) []byte {
	if n == 0 {
		return nil
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n == 0 {
				return data[i+1:]
			}
		}
	}
	return data
}
