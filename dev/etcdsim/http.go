package etcdsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// httpHandler serves what etcd's client port serves over HTTP/1 and the
// hub or a spoke reads: /version (the hub reads the cluster version
// there) and /health.
func httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, req *http.Request) {
		r, m, ok := httpMember(w, req)
		if !ok {
			return
		}
		r.mu.Lock()
		v := map[string]string{"etcdserver": r.versionLocked(m), "etcdcluster": r.opts.ClusterVersion, "storage": r.storageVersionLocked(m)}
		r.mu.Unlock()
		if v["storage"] == "" {
			v["storage"] = "unknown"
		}
		writeJSON(w, http.StatusOK, v)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, req *http.Request) {
		r, m, ok := httpMember(w, req)
		if !ok {
			return
		}
		r.mu.Lock()
		leader := r.leaderOf(m)
		alarms := len(r.alarms)
		r.mu.Unlock()
		switch {
		case leader == 0:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"health": "false", "reason": "RAFT NO LEADER"})
		case alarms > 0:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"health": "false", "reason": "ALARM NOSPACE"})
		default:
			writeJSON(w, http.StatusOK, map[string]string{"health": "true", "reason": ""})
		}
	})
	// The peer view the spoke reads (spoke/etcdstatus): rafthttp's gauge
	// etcd_network_active_peers, 1 for a peer the member is connected to,
	// 0 for one it lost; a peer that never ran has no series yet.
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, req *http.Request) {
		r, m, ok := httpMember(w, req)
		if !ok {
			return
		}
		var b strings.Builder
		b.WriteString("# TYPE etcd_network_active_peers gauge\n")
		r.mu.Lock()
		for _, o := range r.members {
			if o == m || (o.name == "" && !o.running) {
				continue
			}
			v := 0
			if connected(m, o) {
				v = 1
			}
			fmt.Fprintf(&b, "etcd_network_active_peers{Local=%q,Remote=%q} %d\n", strconv.FormatUint(m.id, 16), strconv.FormatUint(o.id, 16), v)
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(b.String()))
	})
	return mux
}

func httpMember(w http.ResponseWriter, req *http.Request) (*Ring, *member, bool) {
	ci, ok := req.Context().Value(connKey{}).(*connInfo)
	if !ok {
		http.Error(w, "etcdsim: no member", http.StatusInternalServerError)
		return nil, nil, false
	}
	if err := ci.ring.waitAnswer(req.Context(), ci.member); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return nil, nil, false
	}
	return ci.ring, ci.member, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
