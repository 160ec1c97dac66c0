package localenv

import (
	"os"
	"sort"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

// Status is a snapshot of a running environment.
type Status struct {
	StateDir   string          `json:"stateDir"`
	Slot       int             `json:"slot"`
	Started    time.Time       `json:"started"`
	Ready      time.Time       `json:"ready"`
	Clusters   []ClusterStatus `json:"clusters"`
	Components []ProcessStatus `json:"components"`
	Failed     []FailedZone    `json:"failed,omitempty"`
	// Partition is the partition into groups in place, if any.
	Partition *Partition `json:"partition,omitempty"`
	// Distance is the distance between units in place, if any
	// (distance.go).
	Distance *DistanceStatus `json:"distance,omitempty"`
	// Partitions is "" when ModePartition is available, else why not.
	Partitions string `json:"partitions,omitempty"`
	// SharedSourceAddress is "" when pods connect from their own address,
	// else why not (Env.SharedSourceAddress).
	SharedSourceAddress string `json:"sharedSourceAddress,omitempty"`
	// Supervisor is the process running the environment.
	Supervisor ProcessStatus `json:"supervisor"`
	// TotalPSS sums the proportional set size of every process.
	TotalPSS uint64 `json:"totalPSS"`
	// TotalRSS sums their resident set sizes (shared pages counted once
	// per process).
	TotalRSS uint64 `json:"totalRSS"`
}

// ClusterStatus is one cluster in Status.
type ClusterStatus struct {
	Name       string          `json:"name"`
	APIServer  string          `json:"apiServer"`
	Kubeconfig string          `json:"kubeconfig"`
	Up         bool            `json:"up"`
	DNS        string          `json:"dns,omitempty"`
	Processes  []ProcessStatus `json:"processes"`
	Pods       []ProcessStatus `json:"pods,omitempty"`
}

// ProcessStatus is one process.
type ProcessStatus struct {
	Name     string `json:"name"`
	PID      int    `json:"pid"`
	Restarts int    `json:"restarts,omitempty"`
	LastExit string `json:"lastExit,omitempty"`
	RSS      uint64 `json:"rss"`
	PSS      uint64 `json:"pss"`
	// Detail is e.g. a pod's IP and zone.
	Detail string `json:"detail,omitempty"`
}

// FailedZone is one failed zone in Status.
type FailedZone struct {
	ZoneRef
	Mode Mode `json:"mode"`
}

// Status returns what runs now, with memory per process.
func (e *Env) Status() Status {
	e.mu.Lock()
	s := Status{StateDir: e.state.Dir, Slot: e.state.Slot, Started: e.t0, Ready: e.ready}
	planes := map[string]*controlPlane{}
	for k, v := range e.planes {
		planes[k] = v
	}
	comps := make([]*compRun, 0, len(e.comps))
	for _, c := range e.comps {
		comps = append(comps, c)
	}
	for z, m := range e.failed {
		s.Failed = append(s.Failed, FailedZone{ZoneRef: z, Mode: m})
	}
	if !e.partition.IsZero() {
		p := e.partition
		s.Partition = &p
	}
	e.mu.Unlock()
	sort.Slice(s.Failed, func(i, j int) bool { return s.Failed[i].String() < s.Failed[j].String() })
	if e.partErr != nil {
		s.Partitions = e.partErr.Error()
	}
	s.SharedSourceAddress = e.SharedSourceAddress()
	s.Distance = e.distanceStatus()
	ps := func(name string, pid, restarts int, lastExit, detail string) ProcessStatus {
		p := ProcessStatus{Name: name, PID: pid, Restarts: restarts, LastExit: lastExit, Detail: detail}
		if pid != 0 {
			p.RSS, p.PSS = proc.Memory(pid)
		}
		s.TotalPSS += p.PSS
		s.TotalRSS += p.RSS
		return p
	}
	s.Supervisor = ps("supervisor", os.Getpid(), 0, "", "")
	for _, c := range e.state.Clusters() {
		cs := ClusterStatus{Name: c.Name, APIServer: c.APIServer, Kubeconfig: e.state.KubeconfigPath(c.Name), DNS: c.DNS}
		if cp := planes[c.Name]; cp != nil {
			cs.Up = true
			for _, svc := range []*service{cp.etcd, cp.apiserver} {
				pid, r, le := svc.Info()
				cs.Processes = append(cs.Processes, ps(svc.name, pid, r, le, ""))
			}
		}
		if a := e.Agent(c.Name); a != nil {
			for _, p := range a.Processes() {
				cs.Pods = append(cs.Pods, ps(p.Namespace+"/"+p.Pod+"/"+p.Container, p.PID, 0, "", p.PodIP+" "+p.Zone))
			}
		}
		if rc := e.realCluster(c.Name); rc != nil {
			procs, pods := e.realStatus(rc)
			for _, p := range procs {
				cs.Processes = append(cs.Processes, ps(p.Name, p.PID, p.Restarts, p.LastExit, p.Detail))
			}
			for _, p := range pods {
				cs.Pods = append(cs.Pods, ps(p.Name, p.PID, 0, "", p.Detail))
			}
		}
		s.Clusters = append(s.Clusters, cs)
	}
	sort.Slice(comps, func(i, j int) bool { return comps[i].spec.Name < comps[j].spec.Name })
	for _, c := range comps {
		pid, r, le := c.svc.Info()
		s.Components = append(s.Components, ps(c.spec.Name, pid, r, le, c.spec.Cluster))
	}
	return s
}
