#!/usr/bin/env bash
# Reads the disassembly of an ARM kernel object and reports, per GEMM micro-kernel, its innermost
# k loops that hold FMAs: instructions, FMAs, loads and vector-register stack accesses (spills).
# Exits 1 if a loop of a packed, wide, row-streaming or hgemm micro-kernel (the blocked path's kernels,
# fused attention's few-row P V, few rows against a large B) touches the stack with a vector
# register.
# Usage: scripts/check_neon_loops.sh OBJDUMP OBJECT [--quiet]
set -euo pipefail
objdump=$1 obj=$2 quiet=${3:-}
"$objdump" -d -C --no-show-raw-insn "$obj" | awk -v quiet="$quiet" '
function hex(s,   i, v) {  # mawk has no strtonum
  v = 0
  for (i = 1; i <= length(s); ++i) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
  return v
}
function is_branch(m) {
  return m ~ /^(b|b\.[a-z]+|b(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)|cbz|cbnz|tbz|tbnz)$/
}
function target(t,   s) {  # the branch target: the hex word before " <"
  s = t
  sub(/ <.*/, "", s)
  sub(/.*[ \t,]/, "", s)
  return hex(s)
}
function analyse(   i, j, t, inner, fma, ld, sp, len, line, bad) {
  if (name == "" || n == 0) return
  line = ""
  for (i = 1; i <= n; ++i) {
    if (!br[i]) continue
    t = tg[i]
    if (t >= ad[i]) continue
    inner = 1; fma = 0; ld = 0; sp = 0; len = 0
    for (j = 1; j <= n; ++j) {
      if (ad[j] < t || ad[j] > ad[i]) continue
      ++len
      if (j != i && br[j] && tg[j] < ad[j] && tg[j] >= t) inner = 0
      if (mn[j] ~ /^(bl|blx|ret)$/) inner = 0
      if (mn[j] ~ /^(fmla|vfma|vmla|bfdot)/) ++fma
      if (mn[j] ~ /^(ld|vld)/) ++ld
      if (tx[j] ~ /(\[sp|sp\]|sp!|\{.*\}.*sp)/ && tx[j] ~ /[^a-z_][qds][0-9]+([^0-9]|$)/) ++sp
    }
    if (!inner || fma == 0 || len > 120) continue
    line = line sprintf(" [%d ins, %d fma, %d ld, %d stack]", len, fma, ld, sp)
    if (sp > 0 && name ~ /(packed|rows_stream|row_panels|hgemm|<[^>]*, [1-4], (1|2|4|8)>)/) bad = 1
  }
  if (line == "") return
  ++kernels
  if (line ~ /[1-9][0-9]* stack/) spilled = spilled " " name
  if (quiet == "" || bad) print name ":" line
  if (bad) failed = 1
}
/^[0-9a-f]+ <.*>:$/ {
  analyse()
  name = ""; n = 0
  if ($0 ~ /(gemm_ukernel[_a-z0-9]*|gemm_rows_stream|gemm_row_panels|bf16_dot_packed[_a-z0-9]*)</) {
    name = $0
    sub(/^[0-9a-f]+ <(void )?(tessera::arch::)?/, "", name)
    sub(/\(.*/, "", name)
  }
  next
}
name != "" && /^ *[0-9a-f]+:\t/ {
  split($0, f, "\t")
  addr = f[1]; sub(/^ */, "", addr); sub(/:$/, "", addr)
  ++n
  ad[n] = hex(addr); mn[n] = f[2]; tx[n] = f[2] " " f[3]
  br[n] = is_branch(f[2]) && f[3] ~ / </
  tg[n] = br[n] ? target(f[3]) : 0
}
END {
  analyse()
  printf "neon loops: %d micro-kernels read; vector spills in k loops:%s%s\n", kernels,
         spilled == "" ? " none" : spilled, failed ? " (FAIL: a packed or wide kernel spills)" : ""
  exit failed
}'
