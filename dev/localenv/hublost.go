package localenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// DestroyHubCluster takes the hub cluster away for good, as a lost
// region would: every component running in it (the hub and any second
// replica) killed, its apiserver and etcd killed, and that etcd's data
// deleted, so nothing of the hub cluster's objects (EtcdClusters, their
// status, the Secrets) survives. The member clusters, their spokes and
// the rings' member pods keep running. Process nodes only.
func (e *Env) DestroyHubCluster() error {
	if e.state.Real() {
		return fmt.Errorf("localenv: DestroyHubCluster is made for process nodes")
	}
	e.mu.Lock()
	var comps []*compRun
	for _, run := range e.comps {
		if run.spec.Cluster == HubClusterName {
			comps = append(comps, run)
		}
	}
	cp := e.planes[HubClusterName]
	delete(e.planes, HubClusterName)
	e.mu.Unlock()
	for _, run := range comps {
		run.svc.Stop(0)
	}
	if cp == nil {
		return fmt.Errorf("localenv: the hub cluster's apiserver is not running")
	}
	cp.stop(0)
	dir := e.state.clusterDir(HubClusterName)
	for _, sub := range []string{"etcd", "apiserver"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return fmt.Errorf("localenv: delete the hub cluster's %s data: %w", sub, err)
		}
	}
	e.log.Info("Destroyed the hub cluster: its components, apiserver and etcd stopped, its data deleted")
	return nil
}

// StartNewHubCluster starts an empty hub cluster where DestroyHubCluster
// took the old one away: a new etcd (no data) and apiserver on the same
// address, reached with the environment's admin kubeconfig. Nothing of
// etcdfed is in it: the caller installs it as a user would (etcdfed hub
// import, etcdfed hub install --hub external, etcdfed cluster join
// --spoke external) and starts the hub process with StartComponent("hub").
func (e *Env) StartNewHubCluster(ctx context.Context) error {
	c, _ := e.state.Cluster(HubClusterName)
	e.mu.Lock()
	running := e.planes[HubClusterName] != nil
	e.mu.Unlock()
	if running {
		return fmt.Errorf("localenv: the hub cluster's apiserver is running")
	}
	start := time.Now()
	cp, err := e.startControlPlane(ctx, c)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.planes[HubClusterName] = cp
	e.mu.Unlock()
	e.log.Info("Started a new hub cluster", "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}
