package localenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SnapshotClusterStore saves a snapshot of a cluster's store (the etcd
// behind its apiserver: every object of that cluster) to path, as an
// operator's backup of a control plane would be taken.
func (e *Env) SnapshotClusterStore(ctx context.Context, name, path string) error {
	c, ok := e.state.Cluster(name)
	if !ok {
		return fmt.Errorf("localenv: no cluster %q", name)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + e.plan.APIEtcd(c.Index).String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("localenv: dial the store of %s: %w", name, err)
	}
	defer cli.Close()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("localenv: snapshot the store of %s: %w", name, err)
	}
	defer rc.Close()
	tmp := path + ".part"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("localenv: snapshot the store of %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// RestoreClusterStore puts a cluster's store back to a snapshot that
// SnapshotClusterStore took: its apiserver and etcd stop (as in a
// control-plane restore), the snapshot is restored with etcdutl into a new
// data directory that takes the old one's place (kept beside it as
// etcd.replaced-<time>, never deleted), and both start again on the same
// addresses. The cluster's components (the hub, in the hub cluster) keep
// running and see the apiserver go and come back with older objects; stop
// and start them around the restore to have them start afresh.
func (e *Env) RestoreClusterStore(ctx context.Context, name, path string) error {
	c, ok := e.state.Cluster(name)
	if !ok {
		return fmt.Errorf("localenv: no cluster %q", name)
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("localenv: restore the store of %s: %w", name, err)
	}
	e.mu.Lock()
	cp := e.planes[name]
	delete(e.planes, name)
	e.mu.Unlock()
	cp.stop(5 * time.Second)

	dataDir := filepath.Join(e.state.clusterDir(name), "etcd")
	restored := dataDir + ".restoring"
	_ = os.RemoveAll(restored) // a restore interrupted before; the data is the snapshot's
	peerURL := "http://" + e.plan.APIEtcdPeer(c.Index).String()
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "etcdutl"), "snapshot", "restore", path,
		"--data-dir", restored, "--name", name,
		"--initial-cluster", name+"="+peerURL, "--initial-advertise-peer-urls", peerURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		if len(out) > 800 {
			out = out[len(out)-800:]
		}
		return fmt.Errorf("localenv: etcdutl snapshot restore for %s: %w: %s", name, err, out)
	}
	if err := os.Rename(dataDir, dataDir+".replaced-"+time.Now().UTC().Format("20060102T150405")); err != nil {
		return fmt.Errorf("localenv: keep the replaced store of %s: %w", name, err)
	}
	if err := os.Rename(restored, dataDir); err != nil {
		return err
	}
	cp, err := e.startControlPlane(ctx, c)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.planes[name] = cp
	e.mu.Unlock()
	return nil
}
