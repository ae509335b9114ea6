#!/usr/bin/env python3
"""llvm-mca's cycles per iteration of every ARM micro-kernel's innermost FMA loop.

Reads the disassembly of an ARM kernel object (objdump -d -C), takes each function's innermost
backward-branching loops that hold vector FMAs, and runs each body through llvm-mca on the
models of current cores: little cortex-a55 and cortex-a510 (LLVM 22's cortex-a520 is the a510's
model); big neoverse-n1 (the Cortex-A76's core: LLVM 22's cortex-a76 and cortex-a78 are the
Cortex-A57's model, printed beside it only to show that) and cortex-a720 (the neoverse-n2
model); neoverse-n2 (i8mm). Prints, per loop: its FMAs (and their lanes:
x4 float32, x8 fp16 arithmetic), loads and widenings (FCVTL / USHLL / VCVT: 16-bit storage),
the cycles per iteration, the flops per cycle, and their fraction of that core's float32 FMA
peak, measured the same way on a loop of 12 independent FMAs (so the peak is the model's own,
not a datasheet's; the fp16 one is printed beside it). One iteration is one k step of a
micro-kernel (several when the compiler unrolled it: the FMA count says how many). Only each
function's k loop is shown: its innermost loop with the most FMAs. The peaks are the models'
own (LLVM 22's cortex-a76, the A57's model, issues one 128-bit FMLA a cycle, its cortex-a55
two, neither as Arm's guides say), so the fractions compare loops with each other on one model, not with a datasheet.
llvm-mca 22 or 19 (scripts/install-deps.sh --mca) is preferred: LLVM 14's models have no core
with i8mm and no Armv9 little or big core; with it the script falls back to cortex-a55,
cortex-a72 and neoverse-n1.

--int: the integer dot loops of the block types instead (sdot, smmla, smull/smlal + sadalp,
vmull.s8 + vpadal): multiply-accumulates per cycle, against a loop of 12 independent
instructions of the loop's own kind on the same model (its integer dot peak).

--bounds: instead of an object's loops, the bound loops of the integer families (bound_loops:
the work the block format forces, nothing else), as a fraction of each model's peak loop.

Usage: scripts/mca_loops.py OBJDUMP OBJECT aarch64|arm [--match REGEX] [--int | --bounds]
"""
import argparse
import re
import shutil
import subprocess
import sys

MCA = next((m for m in ("llvm-mca-22", "llvm-mca-19", "llvm-mca") if shutil.which(m)), "llvm-mca")
CPUS = (["cortex-a55", "cortex-a510", "neoverse-n1", "cortex-a76", "cortex-a720", "neoverse-n2"]
        if MCA != "llvm-mca" else ["cortex-a55", "cortex-a72", "neoverse-n1"])


def functions(objdump, obj):
    out = subprocess.run([objdump, "-d", "-C", "--no-show-raw-insn", obj], check=True,
                         capture_output=True, text=True).stdout
    name, body = None, []
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2), m.group(3)))
    if name:
        yield name, body


BRANCH = re.compile(r"^(b|b\.\w+|b(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)|cbz|cbnz|tbz|tbnz"
                    r"|bne|beq|bgt|blt|bge|ble|bhi|bls|bcc|bcs)(\.w|\.n)?$")


def target(ops):
    m = re.search(r"\b([0-9a-f]+) <", ops)
    return int(m.group(1), 16) if m else None


def innermost_loops(body):
    """(start, end) index ranges of backward branches with no inner backward branch or call."""
    loops = []
    for i, (addr, mn, ops) in enumerate(body):
        if not BRANCH.match(mn):
            continue
        t = target(ops)
        if t is None or t >= addr:
            continue
        start = next((j for j, b in enumerate(body) if b[0] == t), None)
        if start is None:
            continue
        inner = True
        for j in range(start, i):
            a2, m2, o2 = body[j]
            t2 = target(o2) if BRANCH.match(m2) else None
            if (t2 is not None and t2 < a2 and t2 >= t) or m2 in ("bl", "blx", "ret"):
                inner = False
                break
        if inner:
            loops.append((start, i))
    return loops


def is_fma(mn):
    return re.match(r"^(fmla|vfma|vmla|fmadd|bfdot|bfmmla|fdot)", mn) is not None


def is_widen(mn, ops):
    return re.match(r"^(fcvtl|fcvtl2|ushll|ushll2|shll|shll2|vcvt|vshll)", mn) is not None


def fma_lanes(mn, ops):
    """Lanes of one FMA: 4 (.4s / q registers f32), 8 (.8h), 2 (.2s / d registers)."""
    if ".8h" in ops:
        return 8
    if ".4s" in ops or re.search(r"\bq\d+", ops):
        return 4
    if ".2s" in ops or re.search(r"\bd\d+", ops):
        return 2
    return 1


# Integer multiply-accumulates of one instruction: sdot 4 lanes x 4, smmla a 2x8 by 8x2 tile,
# the widening multiplies 8 byte products (sadalp / vpadal only add pairs).
INT_MACS = {"sdot": 16, "smmla": 32, "smull": 8, "smull2": 8, "smlal": 8, "smlal2": 8,
            "vmull.s8": 8, "vmlal.s8": 8}
INT_PEAK = {"sdot": "sdot v%d.4s, v12.16b, v13.16b", "smmla": "smmla v%d.4s, v12.16b, v13.16b",
            "smull": "smull v%d.8h, v12.8b, v13.8b", "vmull.s8": "vmull.s8 q%d, d24, d25"}


def int_kind(mn):
    """The peak loop a dot instruction is measured against (smlal and smull2 count as smull)."""
    if mn in ("sdot", "smmla", "vmull.s8"):
        return mn
    if mn == "vmlal.s8":
        return "vmull.s8"
    return "smull" if mn in INT_MACS else None


def int_main(a, triple):
    attr = "-mattr=+dotprod,+i8mm" if a.arch == "aarch64" else None
    peaks = {}
    print(f"# {MCA} {a.arch}: integer dot loops; % of the model's peak for the loop's kind "
          "(12 independent instructions of it: " + ", ".join(sorted(INT_PEAK)) + ")")
    print("| loop | kind | dot insns | MACs/iter | " +
          " | ".join(f"{cpu} cycles/iter, MACs/cycle, % peak" for cpu in CPUS) + " |")
    print("|---|---|---|---|" + "---|" * len(CPUS))
    rows = 0
    for name, body in functions(a.objdump, a.object):
        if not re.search(a.match, name):
            continue
        best = None
        for s, e in innermost_loops(body):
            macs = sum(INT_MACS.get(ins[1], 0) for ins in body[s:e])
            if macs and (best is None or macs > best[0]):
                best = (macs, s, e)
        if not best:
            continue
        macs, s, e = best
        insns = body[s:e]
        kinds = [int_kind(ins[1]) for ins in insns if int_kind(ins[1])]
        kind = max(set(kinds), key=kinds.count)
        lines = [clean(mn, ops) for _, mn, ops in insns if not BRANCH.match(mn)]
        cells = []
        for cpu in CPUS:
            key = (kind, cpu)
            if key not in peaks:
                c = mca([INT_PEAK[kind] % i for i in range(12)], triple, cpu, attr)
                peaks[key] = 12 * INT_MACS[kind] / c if c else None
            c = mca(lines, triple, cpu, attr)
            if c is None or not peaks[key]:
                cells.append("n/a")
                continue
            cells.append(f"{c:.1f}, {macs / c:.1f}, {100 * macs / c / peaks[key]:.0f}%")
        print(f"| {short(name)} | {kind} | {len(kinds)} | {macs} | " + " | ".join(cells) + " |")
        rows += 1
    print("# peaks, MACs/cycle: " + ", ".join(f"{k} on {c} {v:.1f}" for (k, c), v in
                                              sorted(peaks.items()) if v))
    return 0 if rows else 1


def bound_loops():
    """The best loop each integer kernel family can be, as (name, dot kind, dot count, body):
    only the work its format forces, the loads aside. Blocks of 32 values each with its own
    scale mean that every 4-lane int32 sum a block makes is started, converted to float, and
    scaled by dq dk into an accumulator before the next block's; P V widens each int8 of V to
    a float once for all its rows. The conversion is scvtf or, where a tile starts its sums at
    the bits of 1.5 2^23, one subtraction (bias)."""
    def tile(dot, per_out, outs, conv):
        body = [f"movi v{o}.4s, #0" for o in range(outs)]
        body += [f"{dot} v{o}.4s, v{16 + i % 8}.16b, v{24 + i % 4}.{'16b' if dot == 'smmla' else '4b[0]'}"
                 for i in range(per_out) for o in range(outs)]
        for o in range(outs):
            body += ([f"scvtf v{o}.4s, v{o}.4s"] if conv == "scvtf" else [f"fsub v{o}.4s, v{o}.4s, v31.4s"])
            body += [f"fmul v{8 + o}.4s, v28.4s, v29.4s", f"fmla v{o + 8}.4s, v{o}.4s, v30.4s"]
        return body

    def pv(rows, conv):  # 16 values of one key's block, 4 vectors, each row's p by element
        body = ["sxtl v0.8h, v26.8b", "sxtl2 v1.8h, v26.16b"]
        for i in range(4):
            h = "sxtl" if i % 2 == 0 else "sxtl2"
            src = f"v{i // 2}.{'4h' if i % 2 == 0 else '8h'}"
            body += ([f"{h} v{2 + i}.4s, {src}", f"scvtf v{2 + i}.4s, v{2 + i}.4s"] if conv == "scvtf"
                     else [f"saddw{'2' if i % 2 else ''} v{2 + i}.4s, v31.4s, {src}",
                           f"fsub v{2 + i}.4s, v{2 + i}.4s, v30.4s"])
        body += [f"fmla v{8 + 4 * r + i}.4s, v{2 + i}.4s, v24.s[{r}]" for r in range(rows) for i in range(4)]
        return body

    def dot4(conv):  # attention, one row, four keys read in place: lanes folded by addp
        body = [f"movi v{o}.4s, #0" for o in range(4)]
        body += [f"sdot v{o}.4s, v{16 + 2 * o + h}.16b, v{24 + h}.16b" for o in range(4) for h in range(2)]
        body += ["addp v4.4s, v0.4s, v1.4s", "addp v5.4s, v2.4s, v3.4s", "addp v6.4s, v4.4s, v5.4s"]
        body += ["scvtf v6.4s, v6.4s" if conv == "scvtf" else "fsub v6.4s, v6.4s, v31.4s"]
        return body + ["fmul v7.4s, v28.4s, v29.4s", "fmla v8.4s, v6.4s, v7.4s"]

    out = []
    for conv in ("scvtf", "bias"):
        out.append((f"sdot tile, 3x8, {conv}", "sdot", 48, tile("sdot", 8, 6, conv)))
        out.append((f"smmla tile, 4x8, {conv}", "smmla", 32, tile("smmla", 4, 8, conv)))
        out.append((f"dot, 1 row x 4 keys, {conv}", "sdot", 8, dot4(conv)))
        out.append((f"P V, 4 rows, {conv}", "fmla", 16, pv(4, conv)))
    return out


def bounds_main(triple):
    attr = "-mattr=+dotprod,+i8mm"
    peaks = {"sdot": INT_PEAK["sdot"], "smmla": INT_PEAK["smmla"],
             "fmla": "fmla v%d.4s, v12.4s, v13.4s"}
    print(f"# {MCA} aarch64: the bound loops (--bounds): % of each model's peak loop of the kind")
    print("| bound loop | kind | " + " | ".join(CPUS) + " |")
    print("|---|---|" + "---|" * len(CPUS))
    for name, kind, count, body in bound_loops():
        cells = []
        for cpu in CPUS:
            peak = mca([peaks[kind] % i for i in range(12)], triple, cpu, attr)
            c = mca(body, triple, cpu, attr)
            cells.append(f"{100 * count / c / (12 / peak):.0f}%" if c and peak else "n/a")
        print(f"| {name} | {kind} | " + " | ".join(cells) + " |")
    return 0


def mca(lines, triple, cpu, attr=None):
    src = "\n".join(lines) + "\n"
    r = subprocess.run([MCA, f"-mtriple={triple}", f"-mcpu={cpu}", "-iterations=200",
                        "-summary-view", "-resource-pressure=0", "-instruction-info=0"] +
                       ([attr] if attr else []),
                       input=src, capture_output=True, text=True)
    if r.returncode != 0:
        return None
    it = re.search(r"Iterations:\s+(\d+)", r.stdout)
    cy = re.search(r"Total Cycles:\s+(\d+)", r.stdout)
    if not it or not cy:
        return None
    return int(cy.group(1)) / int(it.group(1))


def clean(mn, ops):
    """The instruction as llvm-mca reads it: objdump's comments and symbolic targets dropped."""
    ops = re.sub(r"\s*//.*$", "", ops)
    ops = re.sub(r"\s*@.*$", "", ops)
    ops = re.sub(r"\s*;.*$", "", ops)
    return f"{mn} {ops}".strip()


def short(name):
    name = re.sub(r"tessera::arch::\w+::", "", name)
    name = name.replace("xsimd::", "")
    name = re.sub(r"\(.*\)$", "", name)
    return name if len(name) < 110 else name[:107] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("objdump")
    ap.add_argument("object")
    ap.add_argument("arch", choices=["aarch64", "arm"])
    ap.add_argument("--match", default=None)
    ap.add_argument("--int", action="store_true")
    ap.add_argument("--bounds", action="store_true")
    a = ap.parse_args()
    triple = "aarch64" if a.arch == "aarch64" else "armv8a"
    if a.bounds:
        return bounds_main(triple)
    if a.int:
        a.match = a.match or r"quant_dot"
        return int_main(a, triple)
    a.match = a.match or r"gemm|dot|wide|rows|ukernel"
    fma_insn = ("fmla v%d.4s, v12.4s, v13.4s" if a.arch == "aarch64"
                else "vfma.f32 q%d, q12, q13")
    peak, peak16 = {}, {}
    for cpu in CPUS:
        c = mca([fma_insn % i for i in range(12)], triple, cpu)
        peak[cpu] = 12 / c if c else None
        c16 = (mca(["fmla v%d.8h, v12.8h, v13.8h" % i for i in range(12)], triple, cpu)
               if a.arch == "aarch64" else None)
        peak16[cpu] = 12 / c16 if c16 else None
    print(f"# {MCA} {a.arch}: FMA peak of each model (12 independent 128-bit FMAs): " +
          ", ".join(f"{cpu} {peak[cpu]:.2f} f32 FMA/cycle ({8 * peak[cpu]:.1f} flops)" +
                    (f", {peak16[cpu]:.2f} f16 FMA/cycle" if peak16[cpu] else "")
                    for cpu in CPUS if peak[cpu]))
    print("# flops/cycle = FMAs x lanes x 2 / cycles; % is of the f32 FMA peak's flops. "
          "cortex-a72 (ARMv8.0) has no fp16 arithmetic: n/a for .8h loops.")
    print("| loop | FMAs | loads | widen | " +
          " | ".join(f"{cpu} cycles/iter, flops/cycle, % f32 peak" for cpu in CPUS) + " |")
    print("|---|---|---|---|" + "---|" * len(CPUS))
    rows = 0
    for name, body in functions(a.objdump, a.object):
        if not re.search(a.match, name):
            continue
        # The function's k loop: of its innermost loops that store at most one vector per 8
        # FMAs (a k loop may spill an accumulator; epilogues, and the backward jumps between
        # an epilogue's blocks, store C around their FMAs), the one with the most FMAs (the
        # others are tails).
        best = None
        for s, e in innermost_loops(body):
            count = sum(1 for ins in body[s:e] if is_fma(ins[1]))
            stores = sum(1 for ins in body[s:e] if re.match(r"^(st|vst)", ins[1]))
            key = (8 * stores <= count, count)
            if count and (best is None or key > best[0]):
                best = (key, s, e)
        for n, (_, s, e) in enumerate([best] if best else []):
            insns = body[s:e]  # the body without its closing branch
            fmas = [ins for ins in insns if is_fma(ins[1])]
            loads = sum(1 for ins in insns if re.match(r"^(ld|vld)", ins[1]))
            widen = sum(1 for ins in insns if is_widen(ins[1], ins[2]))
            lines = [clean(mn, ops) for _, mn, ops in insns if not BRANCH.match(mn)]
            lanes = fma_lanes(fmas[0][1], fmas[0][2])
            cells = []
            for cpu in CPUS:
                c = mca(lines, triple, cpu) if not (lanes == 8 and cpu == "cortex-a72") else None
                if c is None or not peak[cpu]:
                    cells.append("n/a")
                    continue
                flops = 2 * lanes * len(fmas) / c
                cells.append(f"{c:.1f}, {flops:.1f}, {100 * flops / (8 * peak[cpu]):.0f}%")
            print(f"| {short(name)} | {len(fmas)} x{lanes} | "
                  f"{loads} | {widen} | " + " | ".join(cells) + " |")
            rows += 1
    if rows == 0:
        print("no FMA loop found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
