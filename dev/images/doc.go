// Package images builds etcdfed's container images without a Docker
// daemon, loads them into a containerd, and renders the Dockerfile that
// builds the same images with docker.
//
// One description, Catalog, says what every image holds: the base (a
// distroless-like root assembled here: passwd, group, nsswitch.conf, the CA
// bundle, /tmp), the binaries in /usr/local/bin, the user, the working
// directories, the entrypoint. Build turns it into an OCI image with
// go-containerregistry (mutate.Append of tar layers onto an empty image)
// and WriteTar writes an OCI layout tarball, which `ctr images import`
// loads (Load). Dockerfile renders the same description as Dockerfile
// stages, so the two cannot drift: `make generate` writes the Dockerfile
// and a test fails when the committed one differs.
//
// It is dev tooling (hack/images, `make images`), never linked into a
// production binary.
package images
