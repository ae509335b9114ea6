#!/usr/bin/env bash
# The house rules of src/ and arch/ (docs/design.md §1-2), checked from the text:
#  - every library source sits in a room of src/ (no file directly in src/);
#  - includes run down the rooms only: api -> layers -> attention -> gemm | softmax -> runtime
#    -> arch/ and include/ (gemm and softmax are siblings: neither includes the other); a room's
#    header is named "room/name.hpp", so a bare name is an error; nothing includes reference/,
#    which includes only the public headers; arch/ includes nothing of src/;
#  - no file in src/ or arch/ over 500 lines, no function over 100 (a planner's ordered rule
#    list, marked "check_layout: rule list" on a line above its signature, excepted);
#  - no status of a Tessera call discarded in bench/ or examples/.
# Usage: scripts/check_layout.sh [root]   (exit status 1 and one line per breach)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

fail=0
breach() { echo "check_layout: $*"; fail=1; }

rank_of() {  # the rank of a room, or of the room a public header belongs to
  case "$1" in
    runtime | tessera/tessera.h | tessera/version.h | tessera/common.hpp | tessera/threading.hpp) echo 1 ;;
    gemm | tessera/gemm.hpp | tessera/convert.hpp) echo 2 ;;
    softmax | tessera/softmax.hpp) echo 2 ;;
    attention | tessera/attention.hpp) echo 3 ;;
    layers | tessera/layers.hpp) echo 4 ;;
    api) echo 5 ;;
    *) echo 0 ;;
  esac
}
room_of() {  # the room a room header or public header belongs to
  case "$1" in
    tessera/gemm.hpp | tessera/convert.hpp) echo gemm ;;
    tessera/softmax.hpp) echo softmax ;;
    tessera/attention.hpp) echo attention ;;
    tessera/layers.hpp) echo layers ;;
    tessera/reference.hpp) echo reference ;;
    tessera/*) echo runtime ;;
    */*) echo "${1%%/*}" ;;
  esac
}
rooms="runtime gemm softmax attention layers api"

for f in src/*; do
  [ -d "$f" ] || breach "$f sits directly in src/ (put it in a room)"
done
for d in src/*/; do
  r=$(basename "$d")
  case " $rooms reference " in *" $r "*) ;; *) breach "src/$r is not a room ($rooms reference)" ;; esac
done

for r in $rooms reference; do
  [ -d "src/$r" ] || continue
  for f in src/"$r"/*; do
    while IFS= read -r inc; do
      n=$(printf '%s' "$inc" | sed -E 's/^#include "([^"]+)".*/\1/')
      case "$n" in
        arch/*) [ "$r" != reference ] || breach "$f includes $n: the reference knows no ISA" ;;
        tessera/reference.hpp)
          [ "$r" = reference ] || breach "$f includes $n: nothing in src/ calls the reference" ;;
        tessera/*)
          [ "$r" != reference ] || continue
          to=$(room_of "$n")
          if [ "$(rank_of "$n")" -gt "$(rank_of "$r")" ] ||
            { [ "$(rank_of "$n")" -eq "$(rank_of "$r")" ] && [ "$to" != "$r" ]; }; then
            breach "$f includes $n: $r may not include $to (includes run down the rooms)"
          fi ;;
        */*)
          to=${n%%/*}
          if [ "$r" = reference ]; then
            breach "$f includes $n: the reference includes only the public headers"
          elif [ "$to" = reference ]; then
            breach "$f includes $n: nothing in src/ calls the reference"
          elif ! case " $rooms " in *" $to "*) true ;; *) false ;; esac; then
            breach "$f includes $n: no such room"
          elif [ ! -f "src/$n" ]; then
            breach "$f includes $n: no such file"
          elif [ "$(rank_of "$to")" -gt "$(rank_of "$r")" ] ||
            { [ "$(rank_of "$to")" -eq "$(rank_of "$r")" ] && [ "$to" != "$r" ]; }; then
            breach "$f includes $n: $r may not include $to (includes run down the rooms)"
          fi ;;
        *) breach "$f includes \"$n\": name its room (\"$r/$n\")" ;;
      esac
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$f" | sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+/#include /' || true)
  done
done

while IFS= read -r hit; do
  breach "$hit: arch/ includes nothing of src/"
done < <(grep -nE '#[[:space:]]*include[[:space:]]+"(\.\./)*(src/|runtime/|gemm/|softmax/|attention/|layers/|api/)' -r arch || true)

# Sizes: files, then functions. A line ending in "{" whose statement starts at most 4 columns in
# (namespaces are not indented: a free function or a struct's member) and is not a namespace,
# type, control statement or initializer opens a body; the next line starting with "}" at that
# indentation or less closes it. The count runs from the first line of the signature (back to
# the previous statement, comment or blank line) to the closing brace.
for f in $(find src arch -name '*.cpp' -o -name '*.hpp' | sort); do
  lines=$(wc -l <"$f")
  [ "$lines" -le 500 ] || breach "$f has $lines lines (at most 500)"
done
awk_prog='
FNR == 1 { depth = 0 }
{
  line[FNR] = $0
  body = $0; sub(/[ \t]*\/\/.*$/, "", body)
  match(body, /^ */); ind = RLENGTH
  if (depth > 0 && body ~ /^ *}/ && ind <= open_ind[depth]) {
    for (; depth > 0 && open_ind[depth] >= ind; depth--) {
      n = FNR - open_start[depth] + 1
      if (n > LIMIT && !open_exempt[depth])
        printf "%s:%d: a function of %d lines (at most %d)\n", FILENAME, open_start[depth], n, LIMIT
    }
    next
  }
  if (body !~ /\{ *$/ || body ~ /= *\{ *$/) next
  start = FNR
  while (start > 1) {
    p = line[start - 1]
    if (p ~ /^ *$/ || p ~ /^ *\/\// || p ~ /^ *#/ || p ~ /[;{}] *(\/\/.*)?$/ || p ~ /\*\/ *$/ ||
        p ~ /^ *(public|private|protected):/) break
    start--
  }
  s = line[start]; sub(/[ \t]*\/\/.*$/, "", s)
  match(s, /^ */); sind = RLENGTH
  if (sind > 4 || (depth > 0 && sind <= open_ind[depth])) next
  if (s ~ /^ *(namespace|extern|struct|class|enum|union)( |$)/ || s ~ /^ *template <.*> *(struct|class) / ||
      s ~ /^ *(if|for|while|switch|do|else|case|default|try|catch)[ ({:]/ || s ~ /^ *[}{\[(]/) next
  exempt = 0
  for (k = start - 1; k >= 1 && k >= start - 4; k--) if (line[k] ~ /check_layout: rule list/) exempt = 1
  depth++; open_ind[depth] = sind; open_start[depth] = start; open_exempt[depth] = exempt
}'
while IFS= read -r hit; do breach "$hit"; done < <(find src arch -name '*.cpp' -o -name '*.hpp' | sort | xargs awk -v LIMIT="${TESSERA_FUNCTION_LINES:-100}" "$awk_prog")

# Statuses: a statement in bench/ or examples/ that starts with a Tessera call returning a status
# and ends there discards it (a failed setup would be timed or printed as a result). Calls that
# return no status are listed; "(void)" marks a status checked elsewhere.
status_prog='
FNR == 1 { prev = ";" }
{
  if (match($0, /^[ \t]+(tessera::[a-z_0-9]+|tessera_[a-z_0-9]+)\(/) && prev ~ /[;{}]$/) {
    name = substr($0, RSTART, RLENGTH); gsub(/[ \t(]/, "", name)
    if (name !~ /^(tessera(::|_)(isa_name|last_error|release_scratch|version|dtype_size|mha_destroy|workspace_peak|scratch_bytes|sgemm_pack_b_size|sgemm_pack_b16_size|sgemm_pack_bq_size))$/)
      printf "%s:%d: the status of %s is discarded\n", FILENAME, FNR, name
  }
  t = $0; sub(/[ \t]*\/\/.*$/, "", t); sub(/[ \t]+$/, "", t)
  if (t != "") prev = t
}'
while IFS= read -r hit; do breach "$hit"; done < <(find bench examples -name '*.cpp' -o -name '*.c' | sort | xargs awk "$status_prog")

[ $fail -eq 0 ] && echo "check_layout: rooms, includes, sizes and statuses hold"
exit $fail
