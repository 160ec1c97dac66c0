#!/usr/bin/env bash
# Builds a kind node image on this machine without any image registry, laid
# out the way `kind build node-image` of the pinned kind release
# (KIND_VERSION in lib.sh) lays one out, and tags it $KIND_NODE_IMAGE
# (default etcdfed/kind-node:<the Kubernetes version hack/tools.sh pins>).
#
#   hack/kind/node-image.sh            build when missing or out of date
#   hack/kind/node-image.sh --force    build again
#   hack/kind/node-image.sh --missing  print the pieces of the cache that are
#                                      missing, one a line, build nothing
#
# The pieces, each cached when it is done (an interrupted one, say by
# .ci/run's `timeout`, is built again from its start next time):
#   tool NAME       a pinned tool in bin/ (hack/tools.sh --for kind)
#   bit NAME-VER    a Go build in bin/kind-node/bits/NAME-VER/ (.done when complete)
#   rootfs FILE     the Debian root filesystem, bin/kind-node/rootfs-*.tar
#   image FILE      the node image, `docker save`d to bin/kind-node/node-<inputs>.tar
# Docker's store is not kept between CI machines, bin/ is: a run that finds
# no current image in Docker but its tar loads the tar (docker load) instead
# of assembling the image again (docs/measurements/kind.md says what each
# costs).
#
# What goes in, from what this machine reaches (Debian's archive and the Go
# module proxy):
#   - the base (kind's images/base): a Debian bookworm root filesystem from
#     debootstrap with the packages kind's base image installs, kind's
#     images/base/files (entrypoint, systemd units, containerd config) from
#     the kind module, containerd, runc, crictl and the CNI plugins built
#     from source at the versions kind's base image pins;
#   - the node (kind's pkg/build/nodeimage): kubeadm, kubelet and kubectl in
#     /usr/bin (hack/tools.sh, the Kubernetes version the project pins),
#     /kind/version, kind's default CNI and storage manifests as the kind
#     module holds them, and the images they and kubeadm need imported into
#     the node's containerd (pinned, as kind does): the control plane
#     (bin/kube-*, bin/etcd, bin/coredns, bin/pause of hack/tools.sh, tagged
#     with the names `kubeadm config images list` prints), kindnetd (a
#     stand-in script, hack/kind/kindnetd.sh, see there why) and the
#     local-path provisioner and its helper.
# The result is cached: the image carries a label with the hash of its
# inputs, and a run finding that label current does nothing. The root
# filesystem, the built binaries and the saved image are cached in
# bin/kind-node/ (ETCDFED_KIND_NODE_CACHE to put them elsewhere).
# Needs root (debootstrap, chroot), Docker, Go; hack/system-deps.sh kind
# installs the Debian packages.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The versions kind's base image (images/base/Dockerfile of KIND_VERSION)
# and its local-path-provisioner image pin.
CONTAINERD_VERSION=v2.3.4
RUNC_VERSION=v1.4.3
CRICTL_VERSION=v1.36.0
CNI_PLUGINS_VERSION=v1.9.1
# kind pins v0.0.34; the Go module proxy serves v0.0.30 only.
LOCAL_PATH_VERSION=v0.0.30
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# kind's base image: images/base/Dockerfile's clean-install list (without
# nfs-common and open-iscsi, for storage this image does not offer, and
# fuse-overlayfs, for rootless), with runc's and the CNI plugins' build
# replaced by ours.
BASE_PACKAGES=systemd,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,e2fsprogs

force=0
missing=0
case ${1:-} in
--force) force=1 ;;
--missing) missing=1 ;;
"") ;;
*) die "usage: hack/kind/node-image.sh [--force | --missing]" ;;
esac

cd "$REPO"
start=$SECONDS
kube_version=$(sed -n 's/^KUBE_VERSION=//p' hack/tools.sh)
[[ -n $kube_version ]] || die "no KUBE_VERSION in hack/tools.sh"
image=${KIND_NODE_IMAGE:-$(default_node_image)}
cache=${ETCDFED_KIND_NODE_CACHE:-$REPO/bin/kind-node}
bits=$cache/bits
rootfs_tar=$cache/rootfs-$DEBIAN_SUITE-$(echo "$BASE_PACKAGES" | sha256sum | cut -c1-12).tar

# inputs: the inputs' hash (the image's label, its tar's name); when the
# image carries it, nothing changed: this script, what it copies into the
# image (kindnetd.sh, README.md), the versions and the binaries. Of lib.sh
# only the value it reads counts (KIND_VERSION): the rest serves the other
# scripts, and a change there must not cost a new image (about 8 minutes).
inputs() {
	{
		cat "${BASH_SOURCE[0]}" hack/kind/kindnetd.sh hack/kind/README.md
		echo "$KIND_VERSION $DEBIAN_SUITE $BASE_PACKAGES $kube_version"
		for b in kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns pause; do
			sha256sum <"bin/$b"
		done
		find "$bits" -type f ! -name .done -print0 | sort -z | xargs -0 sha256sum
	} | sha256sum | cut -c1-16
}

# go_bit NAME VERSION CGO TAGS LDFLAGS PKG...: go install PKG@VERSION into
# bin/kind-node/bits/NAME-VERSION/ once (with --missing: say whether it is
# there).
go_bit() {
	local name=$1 version=$2 cgo=$3 tags=$4 ld=$5
	shift 5
	local dir=$bits/$name-$version
	[[ -f $dir/.done ]] && return
	if ((missing)); then
		echo "bit $name-$version"
		return
	fi
	log "Building $name $version from the Go module proxy"
	local t0=$SECONDS
	rm -rf "$dir"
	mkdir -p "$dir"
	local pkgs=() p
	for p in "$@"; do pkgs+=("$p@$version"); done
	# Go's build and module caches for these builds live beside them in
	# bin/'s cache (a CI machine keeps bin/ between runs, not ~/.cache): a
	# build cut short by CI's time limit keeps every package it compiled
	# and every module it fetched, so the next run goes on from there
	# instead of starting again (containerd alone took 27 minutes under
	# load, more than a run's tail).
	GOCACHE=$cache/go-build GOMODCACHE=$cache/go-mod GOBIN=$dir CGO_ENABLED=$cgo GOFLAGS=-trimpath \
		nice go install -p 1 -tags "$tags" -ldflags "$ld" "${pkgs[@]}"
	touch "$dir/.done"
	log "Built $name $version in $((SECONDS - t0))s"
}

# go_bits: the Go builds of kind's base image, at the versions it pins.
go_bits() {
	go_bit containerd "$CONTAINERD_VERSION" 0 "no_btrfs no_devmapper no_zfs" \
	"-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
	github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr \
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
go_bit runc "$RUNC_VERSION" 1 "seccomp urfave_cli_no_docs" "-s -w -X main.version=${RUNC_VERSION#v}" github.com/opencontainers/runc
go_bit crictl "$CRICTL_VERSION" 0 "" "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" sigs.k8s.io/cri-tools/cmd/crictl
go_bit cni "$CNI_PLUGINS_VERSION" 0 "" "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" \
	github.com/containernetworking/plugins/plugins/ipam/host-local github.com/containernetworking/plugins/plugins/main/loopback \
	github.com/containernetworking/plugins/plugins/main/ptp github.com/containernetworking/plugins/plugins/meta/portmap
go_bit local-path-provisioner "$LOCAL_PATH_VERSION" 0 "" "-s -w" github.com/rancher/local-path-provisioner
}

if ((missing)); then
	# What a build would still make, in the order it makes it; nothing
	# when the cache holds all the kind turn needs (the tools, the bits
	# the inputs' hash reads, and the saved image; the root filesystem
	# only to assemble an image not saved yet).
	tools_out=$(hack/tools.sh --for kind --missing)
	bits_out=$(go_bits)
	[[ -z $tools_out ]] || sed 's/^/tool /' <<<"$tools_out"
	[[ -z $bits_out ]] || echo "$bits_out"
	saved='node-<inputs>.tar' # named once the pieces above are there
	[[ -n $tools_out || -n $bits_out ]] || saved=node-$(inputs).tar
	if [[ ! -f $cache/$saved ]]; then
		[[ -f $rootfs_tar ]] || echo "rootfs ${rootfs_tar#"$REPO"/}"
		echo "image ${cache#"$REPO"/}/$saved"
	fi
	exit 0
fi

need docker go debootstrap chroot tar sha256sum
[[ $(id -u) -eq 0 ]] || die "node-image.sh needs root (debootstrap and chroot)"
docker info >/dev/null 2>&1 || die "cannot reach the Docker engine (docker info failed)"
mkdir -p "$bits"

tmp=$(mktemp -d /var/tmp/etcdfed-kind-node.XXXXXX)
build_container=""
cleanup() {
	[[ -n $build_container ]] && docker rm -f -v "$build_container" >/dev/null 2>&1
	# A debootstrap cut short may leave /proc, /sys or a bind of /dev
	# mounted in its target: unmounted first, and rm stays on this file
	# system whatever is left.
	findmnt -rn -o TARGET | grep -F "$tmp/" | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT
# A timeout's TERM (.ci/run builds the pieces within the time it has)
# still cleans up; the piece it cut short was not marked done.
trap 'exit 143' TERM INT

step "Kubernetes $kube_version: kubeadm, kubelet, kubectl and the control plane (hack/tools.sh)"
hack/tools.sh kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns pause containerd

step "containerd, runc, crictl, CNI plugins, local-path-provisioner (kind's pinned versions)"
go_bits
# Every piece is built: the caches that carried a cut-short build over
# to the next run are no longer needed (about a GB).
if [[ -d $cache/go-build || -d $cache/go-mod ]]; then
	GOMODCACHE=$cache/go-mod go clean -modcache 2>/dev/null || true
	rm -rf "$cache/go-build" "$cache/go-mod"
fi

inputs=$(inputs)
current() { [[ $(docker image inspect -f '{{ index .Config.Labels "dev.etcdfed.kind-node.inputs" }}' "$image" 2>/dev/null) == "$inputs" ]]; }
saved=$cache/node-$inputs.tar
# save: the image into bin/'s cache, for a machine whose Docker store
# lacks it (the older images' tars go).
save() {
	step "Saving $image to ${saved#"$REPO"/}"
	local t0=$SECONDS
	docker save -o "$saved.tmp" "$image"
	mv "$saved.tmp" "$saved"
	find "$cache" -maxdepth 1 -name 'node-*.tar*' ! -name "node-$inputs.tar" -delete
	log "Saved $image in $((SECONDS - t0))s ($(du -m "$saved" | cut -f1) MB)"
}
if ((!force)) && current; then
	log "$image is up to date (inputs $inputs)"
	[[ -f $saved ]] || save
	exit 0
fi
if ((!force)) && [[ -f $saved ]]; then
	step "Loading $image from ${saved#"$REPO"/} (inputs $inputs)"
	t0=$SECONDS
	docker load -q -i "$saved" >/dev/null
	current || die "${saved#"$REPO"/} did not hold $image of inputs $inputs"
	log "Loaded $image in $((SECONDS - t0))s ($(du -m "$saved" | cut -f1) MB)"
	exit 0
fi

# ---------------------------------------------------------------------------
if [[ ! -f $rootfs_tar ]]; then
	step "Debian $DEBIAN_SUITE root filesystem (debootstrap, $DEBIAN_MIRROR)"
	t0=$SECONDS
	debootstrap --variant=minbase --include="$BASE_PACKAGES" "$DEBIAN_SUITE" "$tmp/debootstrap" "$DEBIAN_MIRROR" |
		grep -E '^(I: (Retrieving|Base system)|E:|W:)' | grep -v 'Retrieving Packages' || true
	[[ -x $tmp/debootstrap/usr/bin/systemctl ]] || die "debootstrap did not install systemd"
	rm -rf "$tmp"/debootstrap/var/lib/apt/lists/* "$tmp"/debootstrap/var/cache/apt/*.bin \
		"$tmp"/debootstrap/var/cache/apt/archives/*.deb "$tmp"/debootstrap/usr/share/doc/* "$tmp"/debootstrap/usr/share/man/*
	tar -C "$tmp/debootstrap" --numeric-owner -cf "$rootfs_tar.tmp" .
	mv "$rootfs_tar.tmp" "$rootfs_tar"
	rm -rf "$tmp/debootstrap"
	log "Built ${rootfs_tar#"$REPO"/} in $((SECONDS - t0))s"
fi

# ---------------------------------------------------------------------------
# The assembly, on this machine's Docker.
assembly=$SECONDS
step "kind $KIND_VERSION's node image builder (Go module proxy)"
kind_dir=$(go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | awk -F'"' '$2 == "Dir" { print $4 }')
[[ -d $kind_dir/images/base/files ]] || die "no images/base/files in the kind module at $kind_dir"
# kind's manifests and image names, read from the kind module's source.
go build -o "$tmp/kindconst" ./hack/kind/kindconst
kconst() { "$tmp/kindconst" "$kind_dir/pkg/build/nodeimage" "$1"; }
kindnetd_image=$(kconst kindnetdImage)
provisioner_image=$(kconst storageProvisionerImage)
helper_image=$(kconst storageHelperImage)
log "kindnetd $kindnetd_image, storage $provisioner_image and $helper_image"

# ---------------------------------------------------------------------------
# kind's images/base/Dockerfile, step by step, on a copy of the root fs.
step "Base image (kind's images/base: files, units, containerd $CONTAINERD_VERSION, runc $RUNC_VERSION, crictl $CRICTL_VERSION, CNI plugins $CNI_PLUGINS_VERSION)"
r=$tmp/rootfs
mkdir -p "$r"
tar -C "$r" --numeric-owner -xf "$rootfs_tar"
f=$kind_dir/images/base/files
install -m 0755 "$f"/usr/local/bin/* "$r/usr/local/bin/"
mkdir -p "$r/kind/bin" "$r/LICENSES" "$r/etc/containerd" "$r/etc/default" "$r/etc/sysctl.d" \
	"$r/etc/systemd/system/kubelet.service.d"
install -m 0644 "$f"/kind/README.txt "$r/kind/"
install -m 0755 "$f"/kind/bin/* "$r/kind/bin/"
install -m 0644 "$f"/LICENSES/* "$r/LICENSES/"
find "$f/etc" -maxdepth 1 -type f -exec install -m 0644 {} "$r/etc/" \;
install -m 0644 "$f"/etc/containerd/* "$r/etc/containerd/"
install -m 0644 "$f"/etc/default/* "$r/etc/default/"
install -m 0644 "$f"/etc/sysctl.d/* "$r/etc/sysctl.d/"
find "$f/etc/systemd/system" -maxdepth 1 -type f -exec install -m 0644 {} "$r/etc/systemd/system/" \;
install -m 0644 "$f"/etc/systemd/system/kubelet.service.d/* "$r/etc/systemd/system/kubelet.service.d/"
chmod 755 "$r/kind" "$r/kind/bin"
find "$r/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
rm -f "$r"/lib/systemd/system/multi-user.target.wants/* "$r"/etc/systemd/system/*.wants/* \
	"$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
	"$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>"$r/etc/systemd/journald.conf"
ln -sfn /usr/lib/systemd/systemd "$r/sbin/init"
chroot "$r" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
chroot "$r" systemctl mask systemd-binfmt.service >/dev/null 2>&1
mkdir -p "$r/etc/kubernetes/manifests" "$r/opt/cni/bin"
install -m 0755 "$bits/containerd-$CONTAINERD_VERSION"/{containerd,ctr,containerd-shim-runc-v2} "$r/usr/local/bin/"
"$r/usr/local/bin/ctr" oci spec |
	chroot "$r" jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
	chroot "$r" jq 'del(.process.rlimits)' >"$r/etc/containerd/cri-base.json"
install -m 0755 "$bits/runc-$RUNC_VERSION/runc" "$r/usr/local/sbin/runc"
install -m 0755 "$bits/crictl-$CRICTL_VERSION/crictl" "$r/usr/local/bin/"
install -m 0755 "$bits/cni-$CNI_PLUGINS_VERSION"/{host-local,loopback,ptp,portmap} "$r/opt/cni/bin/"
chroot "$r" containerd --version >/dev/null
chroot "$r" runc --version >/dev/null
base=etcdfed/kind-base:$inputs
# The imported root filesystem is also the layer under the preloaded
# images (rootfs_image), which must not inherit systemd's stop signal.
rootfs_image=etcdfed/kind-rootfs:$inputs
tar -C "$r" --numeric-owner -c . | docker import - "$rootfs_image" >/dev/null
# docker import and commit take no STOPSIGNAL (Docker 20.10); a build
# from stdin without a context adds it (systemd shuts down on SIGRTMIN+3,
# as kind's base image says).
printf 'FROM %s\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\nENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]\n' "$rootfs_image" | DOCKER_BUILDKIT=0 docker build -q -t "$base" - >/dev/null 2>&1 ||
	die "docker build of the base image's STOPSIGNAL failed"
# A slim layer for the control plane's images: the C library the
# binaries of hack/tools.sh link against, CA certificates and /tmp, so the
# node unpacks a few megabytes, not the root filesystem, before its first
# pod (the sandbox) starts.
s=$tmp/slim
mkdir -p "$s/tmp" "$s/etc/ssl/certs" "$s/usr/local/bin"
chmod 1777 "$s/tmp"
for lib in /lib64/ld-linux-x86-64.so.2 /lib/x86_64-linux-gnu/libc.so.6 /lib/x86_64-linux-gnu/libresolv.so.2; do
	mkdir -p "$s$(dirname "$lib")"
	chroot "$r" cat "$lib" >"$s$lib" # the file, through the root fs's own links
	chmod 0755 "$s$lib"
done
cp "$r/etc/ssl/certs/ca-certificates.crt" "$s/etc/ssl/certs/"
cp "$r/etc/nsswitch.conf" "$r/etc/passwd" "$r/etc/group" "$s/etc/"
slim_image=etcdfed/kind-slim:$inputs
tar -C "$s" --numeric-owner -c . | docker import - "$slim_image" >/dev/null
rm -rf "$r" "$s"
log "Base image $base"

# ---------------------------------------------------------------------------
# The images the node preloads, each a layer of files over the slim layer
# or, for those that run other programs (iptables, sh), the root
# filesystem's layer, which the node's containerd then holds once.
step "The images kubeadm, the CNI and the storage manifests need"
mapfile -t required < <(bin/kubeadm config images list --kubernetes-version "$kube_version")
sandbox=$(sed -n 's/^ *sandbox_image = "\(.*\)"/\1/p' "$f/etc/containerd/config.toml")
[[ -n $sandbox ]] || die "no sandbox_image in kind's containerd config"
images=()
# component FROM TAG ENTRYPOINT FILE:DEST...: TAG, FROM with FILEs added.
component() {
	local from=$1 tag=$2 entrypoint=$3 c spec
	shift 3
	c=$(docker create "$from" /bin/true)
	for spec in "$@"; do
		docker cp -L "${spec%%:*}" "$c:${spec#*:}" || {
			docker rm "$c" >/dev/null
			die "cannot copy ${spec%%:*} into $tag"
		}
	done
	docker commit --change "ENTRYPOINT $entrypoint" "$c" "$tag" >/dev/null
	docker rm "$c" >/dev/null
	images+=("$tag")
	log "  $tag"
}
for ref in "${required[@]}" "$sandbox"; do
	name=${ref%:*}
	name=${name##*/}
	case $name in
	kube-apiserver | kube-controller-manager | kube-scheduler | etcd)
		component "$slim_image" "$ref" '[]' "bin/$name:/usr/local/bin/$name" ;;
	# kube-proxy runs iptables: the whole root filesystem.
	kube-proxy) component "$rootfs_image" "$ref" '[]' "bin/$name:/usr/local/bin/$name" ;;
	coredns) component "$slim_image" "$ref" '["/coredns"]' bin/coredns:/coredns ;;
	pause) component "$slim_image" "$ref" '["/pause"]' bin/pause:/pause ;;
	*) die "no image source for $ref (kubeadm config images list)" ;;
	esac
done
component "$rootfs_image" "$kindnetd_image" '["/bin/kindnetd"]' hack/kind/kindnetd.sh:/bin/kindnetd bin/kubectl:/usr/local/bin/kubectl
component "$slim_image" "$provisioner_image" '["/usr/local/bin/local-path-provisioner"]' \
	"$bits/local-path-provisioner-$LOCAL_PATH_VERSION/local-path-provisioner:/usr/local/bin/local-path-provisioner"
# The helper runs the provisioner's setup and teardown shell scripts.
component "$rootfs_image" "$helper_image" '[]' "$REPO/hack/kind/README.md:/README.kind-etcdfed.md"

# ---------------------------------------------------------------------------
# kind's pkg/build/nodeimage buildImage: a build container of the base,
# binaries copied in, /kind/version, the manifests, images imported into
# its containerd, committed with kind's entrypoint.
step "Node image $image (kind's pkg/build/nodeimage layout)"
build_container=etcdfed-kind-build-$$
docker run -d --entrypoint=sleep --name="$build_container" --security-opt seccomp=unconfined "$base" infinity >/dev/null
for b in kubeadm kubelet kubectl; do
	docker cp -L "bin/$b" "$build_container:/usr/bin/$b"
	docker exec "$build_container" chmod +x "/usr/bin/$b"
	docker exec "$build_container" chown root:root "/usr/bin/$b"
done
docker exec -i "$build_container" sh -c 'mkdir -p /kind && cat >/kind/version' <<<"$kube_version"
docker exec "$build_container" mkdir -p /kind/manifests
kconst defaultCNIManifest | docker exec -i "$build_container" sh -c 'cat >/kind/manifests/default-cni.yaml'
kconst defaultStorageManifest | docker exec -i "$build_container" sh -c 'cat >/kind/manifests/default-storage.yaml'
docker exec "$build_container" bash -c 'nohup containerd >/dev/null 2>&1 &'
docker exec "$build_container" bash -c 'for i in $(seq 50); do [ -S /run/containerd/containerd.sock ] && ctr info >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1' ||
	die "containerd did not start in the build container"
docker save "${images[@]}" | docker exec -i "$build_container" \
	ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
# ctr names an untagged manifest of docker save's archive import-<date>.
docker exec "$build_container" bash -c 'ctr --namespace=k8s.io images list -q | grep "^import-" | xargs -r ctr --namespace=k8s.io images rm' >/dev/null
docker exec "$build_container" ctr --namespace=k8s.io images list -q | grep -v '^sha256:' | sed 's/^/  imported /' >&2
docker exec "$build_container" pkill containerd
docker exec "$build_container" bash -c 'for i in $(seq 50); do pgrep -x containerd >/dev/null || exit 0; sleep 0.2; done; exit 1' || true
old_image=$(docker image inspect -f '{{ .Id }}' "$image" 2>/dev/null || true)
docker commit \
	--change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
	--change 'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""' \
	--change "LABEL dev.etcdfed.kind-node.inputs=$inputs dev.etcdfed.kind-node.kind=$KIND_VERSION" \
	"$build_container" "$image" >/dev/null
docker rmi "${images[@]}" >/dev/null
docker rmi "$rootfs_image" "$slim_image" >/dev/null
# The image this one replaces, and the bases only it used.
[[ -n $old_image ]] && { docker rmi "$old_image" >/dev/null 2>&1 || true; }
docker image ls "etcdfed/kind-base" -q --filter "before=$base" | xargs -r docker rmi >/dev/null 2>&1 || true
log "Built $image in $((SECONDS - start))s, its assembly $((SECONDS - assembly))s ($(docker image inspect -f '{{ .Size }}' "$image" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
save
