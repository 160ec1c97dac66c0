// Package version holds the build's version, stamped by the Makefile.
package version

import "runtime/debug"

// Version is set with -ldflags "-X github.com/etcdfed/etcdfed/internal/version.Version=...".
var Version = ""

// String returns Version, else the module version or VCS revision the
// binary was built from, else "dev".
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}

// Registry is where etcdfed's images are published: <Registry>/hub,
// <Registry>/spoke and <Registry>/etcdfed-init (the member pods' init
// containers), each tagged with the version.
const Registry = "ghcr.io/etcdfed"

// Image is the reference of etcdfed's image name at this build's version,
// such as ghcr.io/etcdfed/etcdfed-init:v0.4.0.
func Image(name string) string { return Registry + "/" + name + ":" + String() }
