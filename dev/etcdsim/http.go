package etcdsim

import (
	"encoding/json"
	"net/http"
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
		v := map[string]string{"etcdserver": r.opts.Version, "etcdcluster": r.opts.ClusterVersion, "storage": r.storageVersionLocked(m)}
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
