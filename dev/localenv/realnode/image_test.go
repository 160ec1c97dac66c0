package realnode

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteArchive reads an archive back as containerd's importer does:
// the index names the image, every blob's name is its sha256, the config
// lists the layer's digest as its diff ID, and the layer holds the files
// (with their directories) and modes.
func TestWriteArchive(t *testing.T) {
	src := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(src, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	img := Image{Name: "example.test/tools/x:v1", Entrypoint: []string{"/usr/local/bin/x"}, User: "65532:65532",
		Files: []ImageFile{{Path: "/usr/local/bin/x", Source: src, Mode: 0o755}, {Path: "/etc/x.conf", Content: []byte("a=b\n")}}}
	if err := WriteArchive(&buf, img); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = data
	}
	for name, data := range files {
		if hex, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && hex != "" && digest(data) != "sha256:"+hex {
			t.Errorf("blob %s has digest %s", name, digest(data))
		}
	}
	var index struct {
		Manifests []descriptor `json:"manifests"`
	}
	mustJSON(t, files["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] != img.Name || index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1" {
		t.Fatalf("index: %s", files["index.json"])
	}
	var man struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	mustJSON(t, files[blobPath(index.Manifests[0].Digest)], &man)
	var cfg struct {
		Config struct {
			Entrypoint []string
			User       string
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	mustJSON(t, files[blobPath(man.Config.Digest)], &cfg)
	if len(man.Layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != man.Layers[0].Digest ||
		cfg.Config.User != img.User || strings.Join(cfg.Config.Entrypoint, " ") != "/usr/local/bin/x" {
		t.Fatalf("manifest %+v, config %+v", man, cfg)
	}
	layer := tar.NewReader(bytes.NewReader(files[blobPath(man.Layers[0].Digest)]))
	var got []string
	for {
		h, err := layer.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %o", h.Name, h.Mode))
	}
	want := "etc/ 755|etc/x.conf 644|usr/ 755|usr/local/ 755|usr/local/bin/ 755|usr/local/bin/x 755"
	if strings.Join(got, "|") != want {
		t.Errorf("layer:\n got %s\nwant %s", strings.Join(got, "|"), want)
	}
	// The same image twice is the same archive (its digests do not change
	// from build to build).
	var again bytes.Buffer
	if err := WriteArchive(&again, img); err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	_ = WriteArchive(&first, img)
	if !bytes.Equal(first.Bytes(), again.Bytes()) {
		t.Error("two archives of one image differ")
	}
}

func mustJSON(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
}
