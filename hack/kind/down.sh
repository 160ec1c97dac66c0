#!/usr/bin/env bash
# Deletes every kind cluster hack/kind/up.sh created (the hub and all member
# clusters of ETCDFED_KIND_PREFIX, default "etcdfed"), their data with them.
# The etcdfed:dev image stays in Docker. Running it again is harmless.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case ${1:-} in
-h | --help)
	echo "Usage: hack/kind/down.sh   (deletes the clusters ${ETCDFED_KIND_PREFIX}-hub and ${MEMBER_PREFIX}<i>)"
	exit 0
	;;
"") ;;
*) die "unknown argument: $1" ;;
esac

need docker kind
clusters=$(kind_clusters)
if [[ -z $clusters ]]; then
	log "No kind clusters named ${ETCDFED_KIND_PREFIX}-hub or ${MEMBER_PREFIX}<i>: nothing to delete"
fi
for c in $clusters; do
	# A paused node (hack/kind/fail-zone.sh) cannot be removed until it
	# runs again.
	for n in $(nodes "$c"); do
		if [[ $(docker inspect -f '{{.State.Paused}}' "$n" 2>/dev/null) == true ]]; then
			docker unpause "$n" >/dev/null
		fi
	done
	step "Deleting $c"
	kind delete cluster --name "$c"
done

# The addresses fail-zone.sh --cut kept for nodes that are gone now.
rm -f "$CUT_DIR/$ETCDFED_KIND_PREFIX"-*
rmdir "$CUT_DIR" 2>/dev/null || true

# up.sh (or kind) creates the docker network "kind", and kind never
# deletes it; once no container is left on it (no other kind cluster
# either), it goes too.
if [[ -z $(kind get clusters 2>/dev/null) ]] && docker network inspect kind >/dev/null 2>&1; then
	if [[ $(docker network inspect -f '{{ len .Containers }}' kind) == 0 ]]; then
		docker network rm kind >/dev/null
		log "Deleted the docker network kind"
	else
		log "The docker network kind still has containers; it stays"
	fi
fi
