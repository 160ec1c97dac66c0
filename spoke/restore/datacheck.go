package restore

import (
	"errors"
	"fmt"
	"google.golang.org/protobuf/proto"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
)

// ErrOtherCluster: the data directory holds data of another etcd cluster
// than the member's. The member must not start on it; the data is kept.
var ErrOtherCluster = errors.New("restore: data of another etcd cluster")

// DataClusterID reads the etcd cluster ID a data directory belongs to,
// from the metadata record every WAL file starts with. ok is false when
// the directory holds no WAL (never started, or not an etcd data
// directory).
func DataClusterID(dataDir string) (id uint64, ok bool, err error) {
	walDir := filepath.Join(dataDir, "member", "wal")
	entries, err := os.ReadDir(walDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", walDir, err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wal") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return 0, false, nil
	}
	// The newest file: every file repeats the metadata.
	slices.Sort(names)
	f, err := os.Open(filepath.Join(walDir, names[len(names)-1]))
	if err != nil {
		return 0, false, fmt.Errorf("open WAL: %w", err)
	}
	defer func() { _ = f.Close() }()
	dec := wal.NewDecoder(fileutil.NewFileReader(f))
	for range 8 { // crc, then metadata, within the first records
		var rec walpb.Record
		if err := dec.Decode(&rec); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, false, fmt.Errorf("read WAL %s: %w", f.Name(), err)
		}
		if rec.GetType() != wal.MetadataType {
			continue
		}
		md := &etcdserverpb.Metadata{}
		if err := proto.Unmarshal(rec.GetData(), md); err != nil {
			return 0, false, fmt.Errorf("WAL %s metadata: %w", f.Name(), err)
		}
		return md.GetClusterID(), true, nil
	}
	return 0, false, fmt.Errorf("WAL %s has no metadata record", f.Name())
}

// CheckCluster refuses a data directory whose WAL belongs to another etcd
// cluster than want (hex, as status.clusterID). A directory without a WAL
// passes: there is nothing of another cluster in it.
func CheckCluster(dataDir, want string) error {
	wantID, err := strconv.ParseUint(want, 16, 64)
	if err != nil {
		return fmt.Errorf("restore: cluster ID %q is not hex: %w", want, err)
	}
	got, ok, err := DataClusterID(dataDir)
	if err != nil || !ok {
		return err
	}
	if got != wantID {
		return fmt.Errorf("%w: data directory %s belongs to etcd cluster %x, this member is of cluster %x: refusing to start etcd on it (the data is kept; only a new incarnation on a new volume can join this cluster)",
			ErrOtherCluster, dataDir, got, wantID)
	}
	return nil
}
