#!/usr/bin/env bash
# Put WordNet 3.0 where nltk can read it offline: DEST/corpora/wordnet.
#
# nltk.download('wordnet') needs the internet. Debian's wordnet-base and
# wordnet-sense-index packages hold the same WordNet 3.0 files, except
# `lexnames` (the 45 lexicographer file names), which nltk requires and which
# we write here. nltk only reads from its own data directories, so the files
# are copied into DEST (default: ./nltk_data), which the project points
# NLTK_DATA at.
set -euo pipefail
DEST="${1:-nltk_data}"
WN="$DEST/corpora/wordnet"
if [ -f "$WN/lexnames" ] && [ -f "$WN/data.noun" ] && [ -f "$WN/index.sense" ]; then
  exit 0
fi
SRC=/usr/share/wordnet
if [ ! -f "$SRC/data.noun" ] || [ ! -f "$SRC/index.sense" ]; then
  if ! command -v apt-get >/dev/null; then
    echo "no WordNet: install Debian's wordnet-base + wordnet-sense-index, or run (online)" >&2
    echo "  python -c \"import nltk; nltk.download('wordnet', download_dir='$DEST')\"" >&2
    exit 1
  fi
  echo "installing Debian packages wordnet-base wordnet-sense-index (WordNet 3.0) ..." >&2
  SUDO=""
  if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
  # wait for another apt/dpkg (e.g. a second `make` or unattended-upgrades) instead of failing
  APT=($SUDO apt-get -o DPkg::Lock::Timeout=600)
  if ! "${APT[@]}" install -y -q wordnet-base wordnet-sense-index >/dev/null 2>&1; then
    "${APT[@]}" update -q >/dev/null
    "${APT[@]}" install -y -q wordnet-base wordnet-sense-index >/dev/null
  fi
fi
mkdir -p "$WN.partial"
find "$SRC" -maxdepth 1 -type f -exec cp {} "$WN.partial/" \;
python3 - "$WN.partial/lexnames" <<'PY'
import sys
# WordNet 3.0's lexicographer files, numbered as in its lexnames file (lexnames(5WN)).
names = """adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact
noun.attribute noun.body noun.cognition noun.communication noun.event noun.feeling
noun.food noun.group noun.location noun.motive noun.object noun.person
noun.phenomenon noun.plant noun.possession noun.process noun.quantity noun.relation
noun.shape noun.state noun.substance noun.time verb.body verb.change verb.cognition
verb.communication verb.competition verb.consumption verb.contact verb.creation
verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative
verb.weather adj.ppl""".split()
assert len(names) == 45
syntactic = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
with open(sys.argv[1], "w") as f:
    for i, name in enumerate(names):
        f.write(f"{i:02d}\t{name}\t{syntactic[name.split('.')[0]]}\n")
PY
rm -rf "$WN"
mv "$WN.partial" "$WN"
echo "WordNet 3.0 ready in $WN" >&2
