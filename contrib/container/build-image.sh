#!/usr/bin/env bash
# Builds electd's container image from scratch with buildah, without a registry: the binary,
# the shared libraries it links (as ldd names them), a user (uid 10001) and the default config
# beside this script (electd.toml: one member on all addresses); entrypoint electd, data in
# the volume /var/lib/electd.
#   contrib/container/build-image.sh BINARY TAG [OCI_ARCHIVE]
# BINARY: an electd binary (target/release/electd); TAG: e.g. electd:0.1.0; OCI_ARCHIVE: also
# write the image there (podman load -i FILE, or skopeo, takes it to a registry or a host).
# $BUILDAH_ARGS (e.g. "--root DIR --runroot DIR --storage-driver vfs") is passed to every
# buildah call, so that a test keeps its images in a directory of its own.
# A Containerfile for hosts with a registry and Docker: contrib/container/Containerfile.
set -euo pipefail
bin="${1:?usage: build-image.sh BINARY TAG [OCI_ARCHIVE]}"
tag="${2:?usage: build-image.sh BINARY TAG [OCI_ARCHIVE]}"
archive="${3:-}"
read -r -a extra <<<"${BUILDAH_ARGS:-}"
b() { buildah "${extra[@]}" "$@"; }
export BUILDAH_ISOLATION=chroot
ctr="$(b from scratch)"
trap 'b rm "$ctr" >/dev/null 2>&1 || true' EXIT
# The dynamic loader and every library ldd resolves, at the paths the binary asks for.
while read -r path; do
  b copy "$ctr" "$(readlink -f "$path")" "$path" >/dev/null
done < <(ldd "$bin" | grep -oE '/[^ ]+' | sort -u)
b copy "$ctr" "$bin" /usr/bin/electd >/dev/null
stage="$(mktemp -d)"
trap 'b rm "$ctr" >/dev/null 2>&1 || true; rm -rf "$stage"' EXIT
mkdir -p "$stage/etc/electd" "$stage/var/lib/electd" "$stage/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nelectd:x:10001:10001:electd:/var/lib/electd:/sbin/nologin\n' >"$stage/etc/passwd"
printf 'root:x:0:\nelectd:x:10001:\n' >"$stage/etc/group"
cp "$(dirname "${BASH_SOURCE[0]}")/electd.toml" "$stage/etc/electd/electd.toml"
b copy "$ctr" "$stage/etc" /etc >/dev/null
b copy --chown 10001:10001 "$ctr" "$stage/var/lib/electd" /var/lib/electd >/dev/null
b copy --chmod 1777 "$ctr" "$stage/tmp" /tmp >/dev/null
b config --entrypoint '["/usr/bin/electd"]' --cmd '--config /etc/electd/electd.toml' \
  --user 10001:10001 --volume /var/lib/electd --port 7001 \
  --label org.opencontainers.image.title=electd \
  --label "org.opencontainers.image.version=$("$bin" --version | cut -d' ' -f2-)" "$ctr"
b commit --quiet "$ctr" "$tag" >/dev/null
if [ -n "$archive" ]; then
  b push --quiet "$tag" "oci-archive:$archive"
fi
echo "build-image.sh: $tag built from $bin"
