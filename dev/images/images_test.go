package images_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/etcdfed/etcdfed/dev/images"
	"github.com/etcdfed/etcdfed/internal/repo"
)

func catalog(t *testing.T) (string, []images.Image) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	v, err := images.ReadVersions(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, images.Catalog("dev", v)
}

// The committed Dockerfile is what the catalog renders: `make generate`
// writes it, and an edit of the catalog without it fails here.
func TestDockerfileIsGenerated(t *testing.T) {
	root, cat := catalog(t)
	want, err := images.Dockerfile(cat)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, string(got)); d != "" {
		t.Errorf("Dockerfile is not what dev/images renders; run make generate (-want +got):\n%s", d)
	}
}

// Every image Build makes has exactly the files (path, mode, owner, size)
// and the config that its Dockerfile stage gives, read back by a small
// interpreter of the Dockerfile: FROM, COPY, WORKDIR, ENV, LABEL, USER,
// EXPOSE, ENTRYPOINT, CMD, and the base's RUN, run here by sh. So the
// Dockerfile builds the same layout as `make images`, though this machine
// has no Docker to build it with.
func TestDockerfileStagesMatchBuiltImages(t *testing.T) {
	_, cat := catalog(t)
	df, err := images.Dockerfile(cat)
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, df)
	rootfs := runRootfs(t, stages)
	bins := t.TempDir()
	for _, img := range cat {
		t.Run(img.Name, func(t *testing.T) {
			in := images.Inputs{Binaries: map[string]string{}}
			out := map[string]string{} // Dockerfile source path -> fake binary
			for i, b := range img.Binaries {
				p := filepath.Join(bins, img.Name+"-"+b.Name)
				if err := os.WriteFile(p, []byte(strings.Repeat("x", 100+i)+b.Name), 0o755); err != nil {
					t.Fatal(err)
				}
				in.Binaries[b.Name] = p
				out[b.Name] = p
			}
			built, err := images.Build(img, in)
			if err != nil {
				t.Fatal(err)
			}
			gotTree, err := images.Tree(built)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := built.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			wantTree, wantCfg := interpret(t, stages, img.Name, rootfs, out)
			if d := cmp.Diff(wantTree, gotTree); d != "" {
				t.Errorf("files differ from the Dockerfile stage (-dockerfile +built):\n%s", d)
			}
			if d := cmp.Diff(wantCfg, cf.Config); d != "" {
				t.Errorf("config differs from the Dockerfile stage (-dockerfile +built):\n%s", d)
			}
			if cf.OS != "linux" {
				t.Errorf("os %q", cf.OS)
			}
		})
	}
}

type stage struct {
	from  string
	instr [][2]string // keyword, rest
}

func parseDockerfile(t *testing.T, df string) map[string]*stage {
	t.Helper()
	stages := map[string]*stage{}
	var cur *stage
	var lines []string
	var acc string
	for _, l := range strings.Split(df, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") || strings.TrimSpace(l) == "" {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			acc += strings.TrimSuffix(l, "\\")
			continue
		}
		lines = append(lines, acc+l)
		acc = ""
	}
	for _, l := range lines {
		kw, rest, _ := strings.Cut(l, " ")
		switch kw {
		case "FROM":
			f := strings.Fields(rest)
			if len(f) < 3 || f[len(f)-2] != "AS" {
				t.Fatalf("FROM without a stage name: %q", l)
			}
			cur = &stage{from: f[len(f)-3]}
			stages[f[len(f)-1]] = cur
		case "ARG":
			if cur == nil {
				continue // global ARG
			}
			fallthrough
		default:
			if cur == nil {
				t.Fatalf("%q before FROM", l)
			}
			cur.instr = append(cur.instr, [2]string{kw, rest})
		}
	}
	return stages
}

// runRootfs runs the rootfs stage's RUN with sh into a temporary
// directory and returns the directory that stands for /rootfs.
func runRootfs(t *testing.T, stages map[string]*stage) string {
	t.Helper()
	st := stages["rootfs"]
	if st == nil {
		t.Fatal("no rootfs stage")
	}
	dir := t.TempDir()
	for _, in := range st.instr {
		if in[0] != "RUN" {
			t.Fatalf("rootfs stage: unexpected %s", in[0])
		}
		cmd := strings.ReplaceAll(in[1], "/rootfs", dir+"/rootfs")
		out, err := exec.Command("sh", "-c", cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("rootfs RUN: %v\n%s", err, out)
		}
	}
	return filepath.Join(dir, "rootfs")
}

// interpret applies the stage name and the stages it is built FROM,
// giving its flattened tree (Tree's format) and config.
func interpret(t *testing.T, stages map[string]*stage, name, rootfs string, bins map[string]string) ([]string, v1.Config) {
	t.Helper()
	files := map[string]string{} // path -> "mode uid:gid size"
	cfg := v1.Config{}
	var chain []*stage
	for n := name; n != "scratch"; {
		st := stages[n]
		if st == nil {
			t.Fatalf("no stage %q", n)
		}
		chain = append([]*stage{st}, chain...)
		n = st.from
	}
	mkdirs := func(dir string) {
		p := "/"
		for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
			p += part + "/"
			if _, ok := files[p]; !ok {
				files[p] = "0755 0:0 0"
			}
		}
	}
	for _, st := range chain {
		for _, in := range st.instr {
			switch in[0] {
			case "COPY":
				f := strings.Fields(in[1])
				from := strings.TrimPrefix(f[0], "--from=")
				srcs, dst := f[1:len(f)-1], f[len(f)-1]
				if from == "rootfs" {
					if len(srcs) != 1 || srcs[0] != "/rootfs/" || dst != "/" {
						t.Fatalf("unexpected COPY %s", in[1])
					}
					copyTree(t, rootfs, files)
					continue
				}
				for _, s := range srcs {
					b := filepath.Base(s)
					host, ok := bins[b]
					if !ok {
						t.Fatalf("COPY %s: the image has no binary %s", in[1], b)
					}
					fi, err := os.Stat(host)
					if err != nil {
						t.Fatal(err)
					}
					// COPY keeps the mode of the file go build wrote
					// (0755) and makes it root's.
					files[dst+b] = "0755 0:0 " + itoa(fi.Size())
				}
			case "WORKDIR":
				mkdirs(in[1])
				cfg.WorkingDir = in[1]
			case "ENV":
				cfg.Env = append(cfg.Env, strings.Fields(in[1])...)
			case "LABEL":
				k, v, _ := strings.Cut(in[1], "=")
				if cfg.Labels == nil {
					cfg.Labels = map[string]string{}
				}
				cfg.Labels[k] = strings.Trim(v, `"`)
			case "USER":
				cfg.User = in[1]
			case "EXPOSE":
				cfg.ExposedPorts = map[string]struct{}{}
				for _, p := range strings.Fields(in[1]) {
					cfg.ExposedPorts[p] = struct{}{}
				}
			case "ENTRYPOINT":
				if err := json.Unmarshal([]byte(in[1]), &cfg.Entrypoint); err != nil {
					t.Fatal(err)
				}
			case "CMD":
				if err := json.Unmarshal([]byte(in[1]), &cfg.Cmd); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("stage %s: the test does not know %s", name, in[0])
			}
		}
	}
	var tree []string
	for p, v := range files {
		tree = append(tree, p+" "+v)
	}
	slices.Sort(tree)
	return tree, cfg
}

// copyTree adds what COPY --from=rootfs /rootfs/ / puts into the image:
// every file and directory below src, its mode kept, owned by root.
func copyTree(t *testing.T, src string, files map[string]string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == src {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel := "/" + filepath.ToSlash(strings.TrimPrefix(p, src+"/"))
		mode := fi.Mode().Perm()
		m := int64(mode)
		if fi.Mode()&fs.ModeSticky != 0 {
			m |= 0o1000
		}
		size := fi.Size()
		if d.IsDir() {
			rel += "/"
			size = 0
		}
		files[rel] = sprintf04o(m) + " 0:0 " + itoa(size)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
