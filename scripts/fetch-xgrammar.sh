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

if [ -f "$dir/.strata-unpacked-2" ]; then
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
# One fix to this version: a string with minLength or maxLength takes any character but the quote,
# the backslash, CR and LF, so a raw tab or other control character can end up inside it, which
# is not JSON (a client's parser rejects the whole answer). Such strings get the character class of
# xgrammar's other strings, without the control characters U+0000-U+001F.
conv=$dir.part/cpp/json_schema_converter.cc
old="builder_.AddCharacterClass({{'\"', '\"'}, {'\\\\', '\\\\'}, {'\\r', '\\r'}, {'\\n', '\\n'}}, true);"
new="builder_.AddCharacterClass({{0, 0x1f}, {'\"', '\"'}, {'\\\\', '\\\\'}}, true);"
OLD=$old NEW=$new perl -pi -e 'BEGIN { $o = $ENV{OLD}; $n = $ENV{NEW} } s/\Q$o\E/$n/' "$conv"
if ! grep -qF "$new" "$conv"; then
  echo "fetch-xgrammar: could not apply the bounded-string fix to $conv" >&2
  exit 1
fi
touch "$dir.part/.strata-unpacked-2"
rm -rf "$dir"
mv "$dir.part" "$dir"
echo "$dir"
