package images

import (
	"fmt"
	"strings"
)

// The base every image starts from: what distroless/static gives a static
// Go binary, assembled here because there is no registry to pull a base
// from. No shell, no package manager.
const (
	// CABundle is where the base holds the CA certificates (Debian's
	// ca-certificates bundle of the machine that builds the image).
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// HostCABundle is the bundle copied into the base, on the machine
	// that builds (and in the Dockerfile's Debian build stage).
	HostCABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// BaseEnv is the environment of every image.
var BaseEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=" + CABundle,
}

// Entry is one file or directory of a layer.
type Entry struct {
	// Path is absolute; a directory's ends in "/".
	Path string
	Mode int64
	// Content of a file; Source names a host file to copy instead.
	Content string
	Source  string
}

// Dir reports whether the entry is a directory.
func (e Entry) Dir() bool { return strings.HasSuffix(e.Path, "/") }

// BaseEntries are the base's files: users root, nobody and nonroot
// (65532, etcdfed's own images run as it), their groups, nsswitch.conf
// (Go's resolver reads it: files, then DNS), the CA bundle and /tmp.
func BaseEntries() []Entry {
	return []Entry{
		{Path: "/etc/", Mode: 0o755},
		{Path: "/etc/passwd", Mode: 0o644, Content: "root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
		{Path: "/etc/group", Mode: 0o644, Content: "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Content: "hosts: files dns\n"},
		{Path: "/etc/ssl/", Mode: 0o755},
		{Path: "/etc/ssl/certs/", Mode: 0o755},
		{Path: CABundle, Mode: 0o644, Source: HostCABundle},
		{Path: "/tmp/", Mode: 0o1777},
		{Path: "/usr/", Mode: 0o755},
		{Path: "/usr/local/", Mode: 0o755},
		{Path: BinDir + "/", Mode: 0o755},
	}
}

// shellQuote quotes s for sh in single quotes; the base's contents hold
// none, checked so that the Dockerfile cannot be rendered wrong.
func shellQuote(s string) (string, error) {
	if strings.ContainsRune(s, '\'') {
		return "", fmt.Errorf("content %q holds a single quote", s)
	}
	return "'" + s + "'", nil
}
