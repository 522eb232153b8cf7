#!/usr/bin/env bash
# Fetches the source of xgrammar (Apache-2.0), whose C++ core strata builds into its constrained
# decoding (cmake/xgrammar.cmake): the PyPI source distribution of one pinned version, checked
# against its sha256 and unpacked under ~/.cache/strata/xgrammar/. Idempotent; prints the source
# directory. Nothing it fetches is committed.
set -euo pipefail

version=0.2.8
sha256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
root=${STRATA_CACHE_DIR:-$HOME/.cache/strata}/xgrammar
dir=$root/xgrammar-$version

if [ -f "$dir/.strata-unpacked" ]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$root"
archive=$root/xgrammar-$version.tar.gz
if [ ! -f "$archive" ] || ! echo "$sha256  $archive" | sha256sum -c --quiet - >/dev/null 2>&1; then
  # The simple index names the file's address; the sdist is what pip would build from.
  url=$(curl -fsSL https://pypi.org/simple/xgrammar/ |
    grep -o "href=\"[^\"]*/xgrammar-$version\.tar\.gz[^\"]*\"" | head -1 | sed -e 's/^href="//' -e 's/#.*//' -e 's/"$//')
  if [ -z "$url" ]; then
    echo "fetch-xgrammar: xgrammar-$version.tar.gz not found in PyPI's index" >&2
    exit 1
  fi
  echo "fetch-xgrammar: downloading $url" >&2
  curl -fsSL -o "$archive.part" "$url"
  mv "$archive.part" "$archive"
fi
if ! echo "$sha256  $archive" | sha256sum -c --quiet - >/dev/null 2>&1; then
  echo "fetch-xgrammar: $archive does not match sha256 $sha256" >&2
  rm -f "$archive"
  exit 1
fi

rm -rf "$dir.part"
mkdir -p "$dir.part"
tar -xzf "$archive" -C "$dir.part" --strip-components=1
touch "$dir.part/.strata-unpacked"
rm -rf "$dir"
mv "$dir.part" "$dir"
echo "$dir"
