package realnode

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// Image is a single-layer OCI image made of local files: what the real
// nodes need that no registry can give them here (the pod sandbox's pause
// image, CoreDNS).
type Image struct {
	// Name is the full reference the nodes know it by, e.g.
	// registry.k8s.io/pause:3.10.1.
	Name string
	// Files are the layer's regular files; their directories are added.
	Files []ImageFile
	// Entrypoint and Cmd are the image's defaults.
	Entrypoint, Cmd []string
	// User is the default user ("65532" or "65532:65532"); "" is root.
	User string
}

// ImageFile is one file of an image's layer.
type ImageFile struct {
	// Path inside the image, absolute.
	Path string
	// Source is a file on this machine to copy; Content is used when
	// Source is "".
	Source  string
	Content []byte
	Mode    int64
}

const (
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// epoch is every file's time, so that an image built twice from the same
// files has the same digest.
var epoch = time.Unix(0, 0).UTC()

// WriteArchive writes img as an OCI image layout archive (what `ctr images
// import` reads): one uncompressed layer, the config, the manifest and an
// index naming the image (io.containerd.image.name).
func WriteArchive(w io.Writer, img Image) error {
	layer, err := buildLayer(img.Files)
	if err != nil {
		return err
	}
	layerDigest := digest(layer)
	cfg := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": img.Entrypoint,
			"Cmd":        img.Cmd,
			"User":       img.User,
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        descriptor{MediaType: mediaConfig, Digest: digest(cfgJSON), Size: int64(len(cfgJSON))},
		"layers":        []descriptor{{MediaType: mediaLayer, Digest: layerDigest, Size: int64(len(layer))}},
	}
	manJSON, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	tag := img.Name[strings.LastIndex(img.Name, ":")+1:]
	index := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{MediaType: mediaManifest, Digest: digest(manJSON), Size: int64(len(manJSON)),
			Annotations: map[string]string{"io.containerd.image.name": img.Name, "org.opencontainers.image.ref.name": tag}}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", indexJSON},
		{blobPath(digest(manJSON)), manJSON},
		{blobPath(digest(cfgJSON)), cfgJSON},
		{blobPath(layerDigest), layer},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

func blobPath(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// buildLayer is the layer's tar: every file's parent directories (0755),
// then the files, sorted by path.
func buildLayer(files []ImageFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	sorted := append([]ImageFile(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, f := range sorted {
		if !path.IsAbs(f.Path) {
			return nil, fmt.Errorf("image file %q: path must be absolute", f.Path)
		}
		var parents []string
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		data := f.Content
		if f.Source != "" {
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, fmt.Errorf("image file %s: %w", f.Path, err)
			}
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
