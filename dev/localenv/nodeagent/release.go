package nodeagent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The image tag picks the release a container runs: a real node pulls
// etcd:v3.5.35 and runs etcd 3.5.35 whatever the command says, so the
// local node does the same with the binaries in its bin directory.
//
//   - A tag that names a release (v3.5.35, 3.6.16, 3.6.16-0) runs
//     bin/<name>-<release> when it exists (bin/etcd-3.5.35, built by
//     hack/tools.sh beside bin/etcd);
//   - otherwise bin/<name> runs when its `--version` reports that release,
//     or reports no release at all (a binary with no version flag);
//   - otherwise the container fails with CreateContainerError naming the
//     release asked for and the one bin/<name> has, as a pull of a missing
//     tag would fail it.
//
// A tag that names no release (latest, 3.6, a digest) runs bin/<name>.

// tagRelease matches an image tag that names a release: an optional v, three
// numbers, an optional -suffix (registry.k8s.io/etcd:3.6.16-0).
var tagRelease = regexp.MustCompile(`^v?([0-9]+\.[0-9]+\.[0-9]+)(-[0-9A-Za-z.-]+)?$`)

// anyRelease finds a release number in a --version output.
var anyRelease = regexp.MustCompile(`[0-9]+\.[0-9]+\.[0-9]+`)

// imageRelease is the release an image's tag names, "" when none.
func imageRelease(image string) string {
	if strings.IndexByte(image, '@') >= 0 {
		return ""
	}
	base := filepath.Base(image)
	i := strings.IndexByte(base, ':')
	if i < 0 {
		return ""
	}
	m := tagRelease.FindStringSubmatch(base[i+1:])
	if m == nil {
		return ""
	}
	return m[1]
}

// containerBinary is the binary a container runs: bin/<base of argv0>,
// or the one of the release the image's tag names.
func (a *Agent) containerBinary(argv0, image string) (string, error) {
	release := imageRelease(image)
	base := filepath.Base(argv0)
	if release == "" || base == "" || base == "." || base == "/" || base == ".." {
		return a.resolveBinary(argv0)
	}
	return a.releaseBinary(filepath.Join(a.cfg.BinDir, base), image, release)
}

// releaseBinary picks the binary of release for the command whose binary
// is bin (from resolveBinary, bin/<name>), as described above. bin may not
// exist when bin/<name>-<release> does.
func (a *Agent) releaseBinary(bin, image, release string) (string, error) {
	if release == "" {
		return bin, nil
	}
	versioned := bin + "-" + release
	if isExecutable(versioned) {
		return versioned, nil
	}
	if !isExecutable(bin) {
		return "", &configError{reasonCreateContainerError, fmt.Sprintf(
			"local node: image %s asks for %s %s: neither %s nor %s exists (hack/tools.sh builds the pinned releases into bin/)",
			image, filepath.Base(bin), release, versioned, bin)}
	}
	has := binaryReleases.of(bin)
	if has == "" || has == release {
		return bin, nil
	}
	return "", &configError{reasonCreateContainerError, fmt.Sprintf(
		"local node: image %s asks for %s %s: %s does not exist and %s is %s (hack/tools.sh builds the pinned releases into bin/)",
		image, filepath.Base(bin), release, versioned, bin, has)}
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// releaseCache remembers what each binary's --version reported, keyed by
// path, size and modification time (a rebuilt binary is asked again).
type releaseCache struct {
	mu   sync.Mutex
	seen map[string]string
}

var binaryReleases = &releaseCache{seen: map[string]string{}}

// of is the first release number bin's --version prints, "" when it prints
// none or fails.
func (c *releaseCache) of(bin string) string {
	fi, err := os.Stat(bin)
	if err != nil {
		return ""
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", bin, fi.Size(), fi.ModTime().UnixNano())
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.seen[key]; ok {
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	r := ""
	if err == nil {
		r = anyRelease.FindString(string(out))
	}
	c.seen[key] = r
	return r
}
