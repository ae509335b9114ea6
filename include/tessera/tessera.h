/* Tessera: CPU kernels for attention (GEMM, online softmax, fused masked attention).
 *
 * The C API. Conventions shared by every function:
 *  - every matrix is row-major float32; leading dimensions and strides are in elements;
 *  - every function returns a tessera_status; on anything but TESSERA_OK no output has been
 *    written and tessera_last_error() starts with the name of the offending argument;
 *  - results are bitwise identical for any thread count.
 *
 * What is checked, and what is trusted:
 *  - Checked: every size, stride, flag and enum value; that each pointer a call reads or writes
 *    through is non-NULL; that every size product (a tensor's extent, a workspace) is computed
 *    without overflow and addresses no more than PTRDIFF_MAX bytes; that no output shares memory
 *    with an input or another output (below). A failure is TESSERA_INVALID_ARGUMENT.
 *  - Trusted: that each pointer addresses at least the elements its sizes and strides describe.
 *    Tessera cannot see an array's length; a shorter array is the caller's bug.
 * Aliasing: an output may not overlap any input or other output (the extents compared are the
 * byte ranges the sizes and strides span), with one exception: softmax and log-softmax run in
 * place when y == x and ldy == ldx exactly. Inputs may share memory with each other (x_kv ==
 * x_q in tessera_mha_forward, a shared B across a batch).
 * Zero sizes: a size of 0 is valid unless a function says otherwise; an output with no
 * elements is not touched, and a reduction over an empty range gives its empty value (C =
 * beta C for k = 0, lse = -inf and zeros for a query that sees no key, a zero context for
 * enc_len = 0). head_dim and value_dim must be > 0 (the default scale is 1/sqrt(head_dim)),
 * as must the MHA layer's feature and head sizes.
 * Memory: a call's scratch comes from its calling thread's buffers, which grow to the largest
 * call made and are then reused (the steady state allocates nothing), taken before any output
 * is written; if they cannot grow, the call returns TESSERA_OUT_OF_MEMORY with no output
 * written. With a workspace bound to the thread (tessera_bind_workspace) it comes from there
 * instead, and no call allocates at all. */
#ifndef TESSERA_TESSERA_H
#define TESSERA_TESSERA_H

#include <stddef.h>
#include <stdint.h>
#include "tessera/version.h"

#if defined(_WIN32) && defined(TESSERA_SHARED)
#if defined(TESSERA_BUILDING)
#define TESSERA_API __declspec(dllexport)
#else
#define TESSERA_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define TESSERA_API __attribute__((visibility("default")))
#else
#define TESSERA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tessera_status {
  TESSERA_OK = 0,
  TESSERA_INVALID_ARGUMENT = 1,
  TESSERA_UNSUPPORTED = 2,
  TESSERA_OUT_OF_MEMORY = 3,
  TESSERA_INTERNAL = 4,
  /* The MIN/MAX members make every int32 value a valid value of the type (in C++ too), so a
   * wrong value from a C caller is rejected by the checks instead of being undefined. */
  TESSERA_STATUS_MIN_ENUM = -0x7FFFFFFF - 1,
  TESSERA_STATUS_MAX_ENUM = 0x7FFFFFFF
} tessera_status;

typedef enum tessera_transpose {
  TESSERA_NO_TRANS = 0,
  TESSERA_TRANS = 1,
  TESSERA_TRANSPOSE_MIN_ENUM = -0x7FFFFFFF - 1,
  TESSERA_TRANSPOSE_MAX_ENUM = 0x7FFFFFFF
} tessera_transpose;

/* Element types of stored arrays: float32, IEEE half (f16) and bfloat16; and two block formats
 * of 32 values each, byte for byte ggml's (so quantizers and caches can be shared):
 *   TESSERA_Q8_0: 34 bytes, an f16 scale d and 32 int8 q: value i = d * q[i] (8.5 bits a value);
 *   TESSERA_Q4_0: 18 bytes, an f16 scale d and 16 bytes of 4-bit q: value i = d * (n_i - 8),
 *                 n_i the low nibble of byte i for i < 16 and the high nibble of byte i - 16
 *                 after (4.5 bits a value).
 * An array of a block type holds whole blocks: its element count is a multiple of 32, and its
 * strides (counted in values, as every stride is) are multiples of 32. tessera_dtype_size gives
 * the bytes of n values of any type. */
typedef enum tessera_dtype {
  TESSERA_F32 = 0,
  TESSERA_F16 = 1,
  TESSERA_BF16 = 2,
  TESSERA_Q8_0 = 3,
  TESSERA_Q4_0 = 4,
  TESSERA_DTYPE_MIN_ENUM = -0x7FFFFFFF - 1,
  TESSERA_DTYPE_MAX_ENUM = 0x7FFFFFFF
} tessera_dtype;

/* Where query i sits among the keys, for causal and window masks and ALiBi distances. */
typedef enum tessera_align {
  TESSERA_ALIGN_TOP_LEFT = 0,     /* position i (PyTorch is_causal) */
  TESSERA_ALIGN_BOTTOM_RIGHT = 1, /* position i + valid_kv_len - q_len (KV-cache decoding) */
  TESSERA_ALIGN_MIN_ENUM = -0x7FFFFFFF - 1,
  TESSERA_ALIGN_MAX_ENUM = 0x7FFFFFFF
} tessera_align;

/* "major.minor.patch" of the library linked (TESSERA_VERSION_* in tessera/version.h are the
 * headers' own: compare them to catch a header/library mismatch). */
TESSERA_API const char* tessera_version(void);
/* TESSERA_VERSION of the library linked. */
TESSERA_API int tessera_version_number(void);

/* ---- introspection and threading ---------------------------------------------------------- */

TESSERA_API const char* tessera_status_string(tessera_status s);
/* The message of the last failed call on this thread ("" if none). */
TESSERA_API const char* tessera_last_error(void);
/* The kernel table in use: "avx512", "avx2" or "sse2" (x86-64), "neon64" or "neon32" (ARM). */
TESSERA_API const char* tessera_isa_name(void);
/* Selects a kernel table by name; TESSERA_UNSUPPORTED if this CPU or build cannot run it.
 * The environment variable TESSERA_ISA does the same at first use. */
TESSERA_API tessera_status tessera_set_isa(const char* name);
/* 1 if the named kernel table can run here. */
TESSERA_API int tessera_isa_supported(const char* name);
/* Runs every later call in a task arena of n threads of Tessera's own; n <= 0 returns to running
 * in the caller's current arena (the default). The application's own TBB work is not capped. */
TESSERA_API tessera_status tessera_set_num_threads(int n);

/* Bytes of scratch Tessera holds over all threads: each call's buffers grow to the largest need
 * and are kept for the next call (see "Memory" above). */
TESSERA_API size_t tessera_scratch_bytes(void);
/* Frees all of it. Calls in flight finish first, and calls made meanwhile wait. */
TESSERA_API tessera_status tessera_release_scratch(void);
/* A workspace of the caller's: binds `bytes` bytes at `buffer` to the calling thread (NULL and 0
 * unbind it). Until then every call made on this thread takes all of its scratch, its worker
 * tasks' included, from the buffer and allocates nothing; a call whose scratch does not fit
 * returns TESSERA_OUT_OF_MEMORY with no output written. Each call gives its part back when it
 * returns, so the buffer needs the largest single call's scratch, which depends on the shape,
 * the thread count and the kernel table; the caller must not use the buffer while it is bound.
 * tessera_workspace_peak() is the most bytes any call has taken from the thread's current
 * binding, plus 63 for any buffer's alignment: bind a generous buffer, make each call once, and
 * a buffer of that many bytes serves them all. */
TESSERA_API tessera_status tessera_bind_workspace(void* buffer, size_t bytes);
TESSERA_API size_t tessera_workspace_peak(void);

/* ---- conversions ---------------------------------------------------------------------------- */

/* y[i] = x[i] converted from type `from` to type `to`, n elements. Narrowing rounds to nearest,
 * ties to even; infinities stay infinite; a NaN stays a NaN of its sign, quieted, with the top
 * bits of its payload; f16 overflow (|x| >= 65520) gives inf; subnormals are kept. Widening is
 * exact. f16 <-> bf16 goes through f32 (one rounding). x and y may not overlap, except x == y
 * when from == to. tessera::reference::f32_to_f16 and its kin are the specification.
 * The block types convert to and from TESSERA_F32, n a multiple of 32, block by block (and to
 * themselves, as every type does: a copy of the blocks; no other pair):
 *   f32 -> q8_0: d = max|x| / 127 (float), q = round(x / d) half away from zero, computed as
 *                x * (1 / d); d stored rounded to f16 (ggml's quantize_row_q8_0_ref);
 *   f32 -> q4_0: m = the value of largest |x| (the first, in a tie), d = m / -8, n = min(15,
 *                trunc(x * (1 / d) + 8.5)), d stored rounded to f16 (quantize_row_q4_0_ref);
 *   q8_0's q clamped to [-127, 127] and q4_0's n to [0, 15] (a NaN product gives q 0): they
 *   leave that range only where d is below 2^-126, so that 1 / d is inexact or infinite, and d
 *   rounds to an f16 0 (ggml converts such values out of range);
 *   a block holding a NaN or an infinity stores d = NaN and every q as 0: it dequantizes to NaN;
 *   q -> f32 is exact (d times the integer).
 * tessera::reference::quantize and dequantize are their specification. */
TESSERA_API tessera_status tessera_convert(tessera_dtype from, tessera_dtype to, int64_t n,
                                           const void* x, void* y);
/* Bytes of n values of type t (a whole number of blocks for the block types); 0 when t is not
 * a type, n < 0, n is not a multiple of a block type's 32, or the size overflows. */
TESSERA_API size_t tessera_dtype_size(tessera_dtype t, int64_t n);

/* ---- GEMM ----------------------------------------------------------------------------------- */

/* C = alpha * op(A) * op(B) + beta * C, op(A) m x k, op(B) k x n, C m x n.
 * beta = 0 never reads C (NaN in C is overwritten). */
TESSERA_API tessera_status tessera_sgemm(tessera_transpose ta, tessera_transpose tb, int64_t m,
                                         int64_t n, int64_t k, float alpha, const float* a,
                                         int64_t lda, const float* b, int64_t ldb, float beta,
                                         float* c, int64_t ldc);

/* The same with A and B each stored as TESSERA_F32, TESSERA_F16 or TESSERA_BF16 (lda and ldb
 * count elements of their type) and C float32: weights kept in 16 bits, read at half the bytes.
 * 16-bit elements are widened exactly as they are read and the products are float32, so the
 * result is sgemm's on the widened operands, within sgemm's error bound. Both float32: sgemm.
 *
 * Weights in a block type (b_type TESSERA_Q8_0 or TESSERA_Q4_0): tb = TESSERA_TRANS, B stored
 * n x k with its blocks along k (a Linear layer's [out][in] rows, ggml's layout), k and ldb
 * multiples of 32, a_type TESSERA_F32. Each row of op(A) is rounded to q8_0 per block of 32 (as
 * tessera_convert rounds), and each block's product is an exact integer dot product times the
 * two scales, summed over blocks in float32: the result is within (k / 32 + 16) 2^-24 (|alpha|
 * S + |beta C|) of tessera::reference::gemm_block_b with round_a (S = sum_p |A_q(i,p) B(j,p)|
 * over the rounded row and the dequantized weights). Against float32 activations (round_a
 * false) the rounding adds at most |alpha| sum_b e_8(a_b) sum_(p in b) |B(j,p)|, a_b the block's
 * largest |A(i,p)| and e_8(a) = 0.00443 a + 4e-6 (tessera_attention_desc's q8_0 bound). alpha = 0
 * or k = 0 reads neither A nor B. The same C for any thread count. */
TESSERA_API tessera_status tessera_gemm_ex(tessera_transpose ta, tessera_transpose tb, int64_t m,
                                           int64_t n, int64_t k, float alpha, tessera_dtype a_type,
                                           const void* a, int64_t lda, tessera_dtype b_type,
                                           const void* b, int64_t ldb, float beta, float* c,
                                           int64_t ldc);

/* Half-precision GEMM: C = alpha * op(A) * op(B) + beta * C with A, B and C all f16 (IEEE half
 * bits; lda, ldb, ldc count halves), the result rounded once to f16; beta = 0 never reads C,
 * alpha = 0 reads neither A nor B. Where the kernel table has fp16 arithmetic (neon64_v82:
 * ARMv8.2 FEAT_FP16) the products are summed in fp16, twice the lanes of float32 per FMA, over
 * chunks of c = min(k, 64) steps whose sums are added in float32; each C element is then within
 *   1.01 (|alpha| S (g_c + e) + |beta C| e + 2^-11 |C exact| + (k + 1) 2^-25 (|alpha| + 1))
 * of the exact result, S = sum_p |A(i,p) B(p,j)|, g_c = c u / (1 - c u) with u = 2^-11 (fp16's
 * unit roundoff: g_64 = 3.2%), e = 2^-22 ceil(k / c) (the float32 adds), the last term fp16's
 * subnormal spacing; a chunk's partial sum beyond 65504 gives inf. Other tables sum in float32
 * (tessera_gemm_ex on the widened operands), well inside that bound.
 * tessera::reference::hgemm is the exact result. The same C for any thread count. */
TESSERA_API tessera_status tessera_hgemm(tessera_transpose ta, tessera_transpose tb, int64_t m,
                                         int64_t n, int64_t k, float alpha, const void* a,
                                         int64_t lda, const void* b, int64_t ldb, float beta,
                                         void* c, int64_t ldc);

/* The same over batch problems; problem i uses a + i*stride_a, b + i*stride_b, c + i*stride_c.
 * stride_a or stride_b may be 0 (a shared operand); C blocks must not overlap. */
TESSERA_API tessera_status tessera_sgemm_strided_batched(
    tessera_transpose ta, tessera_transpose tb, int64_t m, int64_t n, int64_t k, float alpha,
    const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
    float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch);

/* Bytes needed to pack op(B) (k x n) for the active kernel table; 0 for bad arguments. */
TESSERA_API size_t tessera_sgemm_pack_b_size(tessera_transpose tb, int64_t k, int64_t n);
/* Packs op(B) into `packed`, a float-aligned buffer of packed_bytes bytes. The size a table needs
 * is tessera_sgemm_pack_b_size's answer for it; if the active table changed since that answer
 * and needs more, the call fails (TESSERA_INVALID_ARGUMENT naming packed_bytes), writing nothing.
 */
TESSERA_API tessera_status tessera_sgemm_pack_b(tessera_transpose tb, int64_t k, int64_t n,
                                                const float* b, int64_t ldb, void* packed,
                                                size_t packed_bytes);
/* tessera_sgemm_pack_b from a B stored as b_type (f32, f16 or bf16; ldb counts its elements):
 * the packed panels hold B widened to float32 (exact), the same bytes tessera_sgemm_pack_b writes
 * for the widened B, and the same size; weights kept in 16 bits, packed once for prefill. */
TESSERA_API tessera_status tessera_sgemm_pack_b_ex(tessera_transpose tb, int64_t k, int64_t n,
                                                   tessera_dtype b_type, const void* b, int64_t ldb,
                                                   void* packed, size_t packed_bytes);
/* Bytes needed to pack op(B) in 16 bits (tessera_sgemm_pack_b16); 0 for bad arguments. */
TESSERA_API size_t tessera_sgemm_pack_b16_size(tessera_transpose tb, int64_t k, int64_t n);
/* Packs op(B), stored as b_type (TESSERA_F16 or TESSERA_BF16), into tessera_sgemm_pack_b's panel
 * layout with its elements kept in b_type: half the bytes of float32 panels. tessera_sgemm_packed
 * widens them exactly as it reads them, so its result is the one it gives for B packed by
 * tessera_sgemm_pack_b_ex (the same sums), while one row of A (a decode step through weights
 * kept in 16 bits) reads half the bytes. Sizes and failures as tessera_sgemm_pack_b. */
TESSERA_API tessera_status tessera_sgemm_pack_b16(tessera_transpose tb, int64_t k, int64_t n,
                                                  tessera_dtype b_type, const void* b, int64_t ldb,
                                                  void* packed, size_t packed_bytes);
/* Bytes needed to pack block-type weights (tessera_sgemm_pack_bq) with ldb = k: 64 (a header),
 * plus B's bytes with n rounded up to the kernel table's tile width (at most 16 columns; 1 where
 * the table has no integer tile), so 64 + ceil(n / w) w (k / 32) x 34 (q8_0) or 18 (q4_0); 0 for
 * bad arguments. */
TESSERA_API size_t tessera_sgemm_pack_bq_size(tessera_transpose tb, int64_t k, int64_t n,
                                              tessera_dtype b_type);
/* Packs weights stored in a block type (b_type TESSERA_Q8_0 or TESSERA_Q4_0; tb = TESSERA_TRANS,
 * B stored n x k with its blocks along k, k and ldb multiples of 32, as tessera_gemm_ex takes
 * them) for tessera_sgemm_packed: the blocks' own bytes regrouped into the panels of the kernel
 * table's integer GEMM tile (where the table has none, the rows as stored): the blocks' own
 * bytes, the columns past n of the last panel zeros, after a header (_pack_bq_size's bytes).
 * tessera_sgemm_packed then rounds A's rows to q8_0 and multiplies as tessera_gemm_ex does, within
 * the bound stated there, for any number of rows: a decode step reads the weights once in the
 * tile's layout. Sizes and failures as tessera_sgemm_pack_b. */
TESSERA_API tessera_status tessera_sgemm_pack_bq(tessera_transpose tb, int64_t k, int64_t n,
                                                 tessera_dtype b_type, const void* b, int64_t ldb,
                                                 void* packed, size_t packed_bytes);
/* C = alpha * op(A) * B + beta * C with B packed by tessera_sgemm_pack_b, _pack_b_ex, _pack_b16
 * or _pack_bq for the same k and n under the same kernel table (otherwise
 * TESSERA_INVALID_ARGUMENT). */
TESSERA_API tessera_status tessera_sgemm_packed(tessera_transpose ta, int64_t m, int64_t n,
                                                int64_t k, float alpha, const float* a, int64_t lda,
                                                const void* packed, float beta, float* c,
                                                int64_t ldc);

/* ---- softmax -------------------------------------------------------------------------------- */

/* y[r,:] = softmax(scale * x[r,:]); scale finite (negative: softmin; 0: uniform rows);
 * y may equal x exactly (in place), and may not overlap it otherwise.
 * An all -inf row gives zeros. */
TESSERA_API tessera_status tessera_softmax(int64_t rows, int64_t cols, const float* x, int64_t ldx,
                                           float* y, int64_t ldy, float scale);
/* y[r,:] = log_softmax(scale * x[r,:]); an all -inf row gives -inf. */
TESSERA_API tessera_status tessera_log_softmax(int64_t rows, int64_t cols, const float* x,
                                               int64_t ldx, float* y, int64_t ldy, float scale);
/* out[r] = log sum_j exp(scale * x[r,j]); -inf for an all -inf row. */
TESSERA_API tessera_status tessera_logsumexp(int64_t rows, int64_t cols, const float* x,
                                             int64_t ldx, float scale, float* out);

/* ---- fused attention ------------------------------------------------------------------------ */

/* O = softmax(scale * Q K^T + masks) V per (batch, query head), never materialising Q K^T.
 * Score of query i (at position p) against key j:
 *   s = softcap(scale * q_i.k_j) + alibi_slope_h * (j - p) + bias[b,h,i,j]
 * Key j is visible when j < valid_kv_len, the causal and window rules allow it, the mask keeps it
 * and s is not -inf. A query with no visible key gets zeros in O and -inf in lse.
 * V rows of keys past valid_kv_len are never read. Other V rows may be multiplied by a zero
 * weight (an invisible key inside a tile some query sees): an inf or NaN in them may make O NaN. */
typedef struct tessera_attention_desc {
  int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, value_dim;
  float scale; /* 0 means 1/sqrt(head_dim) */
  /* strides in elements for (batch, head, seq); the feature dimension is contiguous */
  int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
  int causal;                        /* 0 or 1: key j visible only if j <= p */
  tessera_align align;               /* position p of query i, for causal, window and ALiBi */
  int64_t window_left, window_right; /* p - left <= j <= p + right; -1 is unbounded */
  const int32_t* kv_lens;            /* [batch] valid key lengths, or NULL for kv_len */
  const float* bias;                 /* additive bias over (batch, head, query, key), or NULL */
  int64_t bias_stride[4];            /* stride 0 broadcasts */
  const uint8_t* mask;               /* keep-mask over (batch, head, query, key), or NULL */
  int64_t mask_stride[4];
  const float* alibi_slopes; /* [q_heads], or NULL */
  float softcap;             /* > 0: softcap * tanh(s / softcap) on scaled scores; 0 off */
  float* lse;                /* optional output [batch][q_heads][q_len], natural log */
  /* Element types of k and v: TESSERA_F32 (the zero value), TESSERA_F16, TESSERA_BF16, or the
   * block types TESSERA_Q8_0 / TESSERA_Q4_0; strides count values of that type (a block type's:
   * multiples of 32, and head_dim / value_dim too). Half-precision keys and values are widened
   * exactly as they are read; block-type ones dequantized exactly (d times the integer), in
   * registers. With a block-type K the scores use each query row rounded to q8_0 (per 32 values
   * of head_dim, as tessera_convert rounds), on every path: s = scale q'.k'. Scores, the
   * softmax statistics and the O accumulator stay float32.
   * The error to plan with, measured (relative RMS of the output against the result on
   * unquantized q, k and v: N(0, 1) data, head_dim 128, decode over 2048 keys and prefill; the
   * worst of both times 1.25, tested on every table; "outliers": four channels of K at 20x;
   * "+H": hadamard = head_dim on K and V):
   *   K / V         Gaussian  outliers  Gaussian+H  outliers+H
   *   q8_0 / q8_0    0.012     0.057     0.012       0.035
   *   q8_0 / f16     0.010     0.057     0.010       0.035
   *   f16  / q8_0    0.007     0.0075    0.007       0.007
   *   q4_0 / q4_0    0.16      0.77      0.16        0.49
   *   q4_0 / q8_0    0.12      0.77      0.11        0.49
   *   q4_0 / f16     0.12      0.77      0.11        0.49
   *   f16  / q4_0    0.11      0.11      0.11        0.11
   * (4-bit keys with outlier channels lose most of the scores' resolution: hadamard or q8_0 K.)
   * A worst-case bound, not an estimate (it is 20 to 10^4 times the error above on such data):
   * against the result on unquantized q, k and v, each element of an output row is within
   *   max_j |v'_j - v_j| + (e^(2 D) - 1) max_j |v_j|,
   *   D = |scale| max_j sum_b (||q'_b||_1 e_K(a_kjb) + e_8(a_qb) ||k_jb||_1)
   * (j the visible keys, b the blocks of 32 along head_dim, a a block's largest |value|, v' and
   * k' the stored values): e_8(a) = 0.00443 a + 4e-6 for q8_0 (half a step of a/127 and the f16
   * scale's rounding), e_4(a) = 0.1255 a + 3e-7 for q4_0 (a whole step of a/8 where the largest
   * value's opposite end is clamped), 0 for f32, e_K and |v' - v| as K's and V's types give;
   * and the float32 arithmetic's own error on top. */
  tessera_dtype k_type, v_type;
  /* Keys stored rotated: 0 (off), or a power of two n dividing head_dim. K holds H k, where H is
   * the orthonormal Walsh-Hadamard transform of each block of n values along the head dimension
   * (tessera_hadamard); each query row is rotated the same way before the scores, so that
   * (H q).(H k) = q.k in exact arithmetic, while a few outlier channels of k are spread over the
   * block before it is quantized (4-bit keys with a few outlier channels lose about half as
   * much). hadamard_v = 1: V holds H v too (n dividing value_dim), and each output row is
   * rotated back (H is its own inverse). */
  int64_t hadamard;
  int hadamard_v;
  /* Attention sinks (gpt-oss, StreamingLLM's learned sink): sinks[h] is a logit per query head
   * (finite, or -inf for none), or NULL. It acts as one more key of every query of head h whose
   * score is sinks[h] and whose value row is zero: it adds exp(sinks[h] - m) to the softmax's
   * denominator, so that a head can put weight on "nothing". lse includes it; a query with no
   * visible key gets zeros and lse = sinks[h]. */
  const float* sinks;
  /* Paged K/V (a block table, as vLLM's PagedAttention): block_table = NULL reads k and v as
   * above. Otherwise k and v are pools of num_pages pages of page_size rows (a multiple of 16),
   * their strides {between pages, between heads, between rows of a page}, and key j of batch b
   * is row j % page_size of page block_table[b * block_table_stride + j / page_size].
   * block_table_stride >= ceil(kv_len / page_size); a batch's first ceil(kv_lens[b] /
   * page_size) entries (kv_len without kv_lens) are pages in [0, num_pages), and only those are
   * read. Batches may share pages (a common prompt). The results are the contiguous call's on
   * the gathered rows; bitwise so when page_size is a multiple of 256 (the tile). */
  const int32_t* block_table;
  int64_t block_table_stride, page_size, num_pages;
} tessera_attention_desc;

/* Fills packed BHSD strides ([batch][head][seq][dim]), scale 0, window -1/-1, options off. */
TESSERA_API tessera_status tessera_attention_desc_init(tessera_attention_desc* desc, int64_t batch,
                                                       int64_t q_heads, int64_t kv_heads,
                                                       int64_t q_len, int64_t kv_len,
                                                       int64_t head_dim, int64_t value_dim);
/* k and v hold elements of desc->k_type and desc->v_type. */
TESSERA_API tessera_status tessera_attention(const tessera_attention_desc* desc, const float* q,
                                             const void* k, const void* v, float* o);
/* y[r, :] = H x[r, :] for `rows` rows of `dim` values (ldx, ldy apart; y == x in place): H the
 * orthonormal Walsh-Hadamard transform of each block of n values (n a power of two dividing
 * dim): float32 butterflies (a + b, a - b) for strides 1, 2, .. n/2 in that order, then each
 * value times 1/sqrt(n) rounded to float; tessera::reference::hadamard gives the same bits. The
 * rotation tessera_attention's `hadamard` expects of the keys. */
TESSERA_API tessera_status tessera_hadamard(int64_t rows, int64_t dim, int64_t n, const float* x,
                                            int64_t ldx, float* y, int64_t ldy);

/* ---- rotary position embeddings ------------------------------------------------------------ */

/* Rotary position embeddings (RoPE): pair m of a head's first rot_dim values, (a, b), becomes
 *   (a cos t - b sin t, a sin t + b cos t),  t = pos * position_scale * theta^(-2m / rot_dim),
 * m < rot_dim / 2; values past rot_dim are left as they are (partial rotary). NEOX pairs value m
 * with m + rot_dim / 2 (GPT-NeoX, Llama, Qwen); GPTJ pairs 2m with 2m + 1 (GPT-J). The angles
 * are computed in double and their cosine and sine rounded to float32 once per position (for
 * every head); the rotation is float32 (each output within 3 ulps of |a| + |b| of the exact
 * rotation of the stored a and b). */
typedef enum tessera_rope_style {
  TESSERA_ROPE_NONE = 0,
  TESSERA_ROPE_NEOX = 1,
  TESSERA_ROPE_GPTJ = 2
} tessera_rope_style;
typedef struct tessera_rope_desc {
  tessera_rope_style style;
  int64_t rot_dim;      /* even, <= head_dim; 0 means head_dim */
  float theta;          /* the frequency base; 0 means 10000 */
  float position_scale; /* linear position scaling (1 / factor); 0 means 1 */
} tessera_rope_desc;
/* x[b, h, i, :] rotated in place at position positions[b * seq + i], or start + i when
 * positions is NULL; stride (in floats) for (batch, head, seq), the head_dim values contiguous.
 * Positions are >= 0 and below 2^53. */
TESSERA_API tessera_status tessera_rope(const tessera_rope_desc* rope, int64_t batch, int64_t heads,
                                        int64_t seq, int64_t head_dim, const int64_t stride[3],
                                        const int64_t* positions, int64_t start, float* x);

/* ---- additive (Bahdanau) attention ---------------------------------------------------------- */

/* e_j = v . tanh(s W_dec + h_j W_enc), alpha = softmax(e), context = sum_j alpha_j h_j.
 * enc: enc_len x enc_dim (rows h_j), dec: dec_dim (s), w_enc: enc_dim x attn_dim,
 * w_dec: dec_dim x attn_dim, v: attn_dim, context: enc_dim, weights: enc_len or NULL. */
TESSERA_API tessera_status tessera_additive_attention(int64_t enc_len, int64_t enc_dim,
                                                      int64_t dec_dim, int64_t attn_dim,
                                                      const float* enc, const float* dec,
                                                      const float* w_enc, const float* w_dec,
                                                      const float* v, float* context,
                                                      float* weights);
/* keys = enc W_enc (enc_len x attn_dim): once per encoded sequence. */
TESSERA_API tessera_status tessera_additive_keys(int64_t enc_len, int64_t enc_dim, int64_t attn_dim,
                                                 const float* enc, const float* w_enc, float* keys);
/* One decoder step against keys from tessera_additive_keys. */
TESSERA_API tessera_status tessera_additive_attention_step(int64_t enc_len, int64_t enc_dim,
                                                           int64_t dec_dim, int64_t attn_dim,
                                                           const float* enc, const float* keys,
                                                           const float* dec, const float* w_dec,
                                                           const float* v, float* context,
                                                           float* weights);

/* One step for `batch` decoder states at once, each against its own encoded sequence:
 * enc [batch][enc_len][enc_dim], keys [batch][enc_len][attn_dim] (tessera_additive_keys of each
 * sequence), dec [batch][dec_dim], context [batch][enc_dim], weights [batch][enc_len] or NULL.
 * enc_lens (NULL: all enc_len) gives each sequence's valid length, in [0, enc_len]: keys past it
 * are ignored and their weights written as 0; a length of 0 gives a zero context. The same
 * result on any thread count; no allocation once the thread's scratch (or a bound workspace)
 * has grown to the step's size. */
TESSERA_API tessera_status tessera_additive_attention_batch(
    int64_t batch, int64_t enc_len, int64_t enc_dim, int64_t dec_dim, int64_t attn_dim,
    const float* enc, const float* keys, const int32_t* enc_lens, const float* dec,
    const float* w_dec, const float* v, float* context, float* weights);

/* ---- multi-head attention layer ------------------------------------------------------------- */

/* out = concat_h(attention(x_q W_q + b_q, x_k W_k + b_k, x_v W_v + b_v)) W_o + b_o.
 * Inputs are [batch][seq][features] rows; weights are in_features x out_features row-major
 * (x W, the transpose of a PyTorch Linear's weight); biases may be NULL.
 * With a KV cache ([batch][kv_heads][cache_capacity][dim], k_cache and v_cache both set), the
 * kv_len new keys/values are written at positions [cache_len, cache_len + kv_len) and the
 * queries attend to all cache_len + kv_len of them; the caller advances cache_len. A cache
 * that cannot hold them is an error, and the cache is left as it was.
 * weight_type: the elements of w_q, w_k, w_v and w_o (f32, f16 or bf16; biases are float32),
 * or a block type (TESSERA_Q8_0, TESSERA_Q4_0): each matrix then stored out x in, a PyTorch
 * Linear's weight as it is (ggml's layout), its blocks along in (q_in_dim, kv_in_dim and
 * q_heads * value_dim multiples of 32), multiplying its input rows rounded to q8_0 as
 * tessera_gemm_ex does (reference::mha_forward does the same).
 * cache_type: the elements of k_cache and v_cache; new rows are projected in float32 and
 * rounded to it (nearest even; a block type quantized row by row as tessera_convert does, which
 * needs head_dim and value_dim multiples of 32, and scores the queries rounded to q8_0 as
 * tessera_attention does). Scores, softmax and sums stay float32. Both default to F32. */
typedef struct tessera_mha_desc {
  int64_t batch, q_len, kv_len;
  int64_t q_in_dim, kv_in_dim, out_dim;
  int64_t q_heads, kv_heads, head_dim, value_dim;
  float scale; /* 0 means 1/sqrt(head_dim) */
  int causal;
  int64_t window_left, window_right;
  const void* w_q; /* q_in_dim x q_heads*head_dim, of weight_type */
  const float* b_q;
  const void* w_k; /* kv_in_dim x kv_heads*head_dim */
  const float* b_k;
  const void* w_v; /* kv_in_dim x kv_heads*value_dim */
  const float* b_v;
  const void* w_o; /* q_heads*value_dim x out_dim */
  const float* b_o;
  void *k_cache, *v_cache; /* of cache_type */
  int64_t cache_capacity, cache_len;
  tessera_dtype weight_type, cache_type;
  /* The attention options, as tessera_attention_desc defines them, over the layer's
   * (batch, q head, query, key) with keys = cache_len + kv_len (with a cache) or kv_len.
   * align: tessera_mha_desc_init sets BOTTOM_RIGHT, the queries being the newest positions
   * (the usual causal mask when q_len == kv_len, the decoding convention with a cache). */
  tessera_align align;
  const int32_t* kv_lens; /* [batch] valid keys, or NULL for all */
  const float* bias;
  int64_t bias_stride[4];
  const uint8_t* mask;
  int64_t mask_stride[4];
  const float* alibi_slopes; /* [q_heads], or NULL */
  float softcap;             /* > 0: softcap * tanh(s / softcap); 0 off */
  float* lse;                /* optional output [batch][q_heads][q_len] */
  /* As the attention's: 0, or a power of two n dividing head_dim (and value_dim with
   * hadamard_v). The layer rotates the projected keys (and values) before they enter the cache
   * or the attention, so a cache holds rotated rows; the output is the unrotated layer's. */
  int64_t hadamard;
  int hadamard_v;
  /* Rotary embeddings (rope.style != TESSERA_ROPE_NONE) of the projected queries and new keys,
   * applied before the keys enter the cache (which holds rotated keys) and before hadamard.
   * Self-attention over the new tokens: q_len == kv_len, query i and new key i at the position
   * rope_positions[b * kv_len + i] (in [0, 2^53)), or cache_len + i when rope_positions is NULL
   * (i without a cache). */
  tessera_rope_desc rope;
  const int64_t* rope_positions;
  const float* sinks; /* [q_heads] sink logits, as tessera_attention_desc's, or NULL */
  /* A ring cache for sliding-window layers (StreamingLLM): ring_window > 0 keeps the cache as
   * ring_keep pinned rows (positions 0 .. ring_keep - 1) and a ring of R = cache_capacity -
   * ring_keep >= ring_window rows, where position p >= ring_keep lives in row ring_keep +
   * (p - ring_keep) % R. cache_len counts every token seen so far (it may pass the capacity:
   * positions and rotary angles keep counting while the memory stays the capacity's). A query
   * at position p sees key j <= p where j < ring_keep or j > p - ring_window: the layer's
   * window; its other options must then be causal = 1, window -1/-1, no kv_lens, bias, mask or
   * alibi_slopes. Each call appends kv_len = q_len new tokens, at most R - ring_window + 1 (so
   * R = ring_window decodes one token a call; prefill a prompt in chunks, or give the ring
   * chunk - 1 rows more). 0 (the default): a plain cache. */
  int64_t ring_window, ring_keep;
  /* A paged cache for a batch of sequences of different lengths (block_table != NULL, with
   * k_cache and v_cache): the caches are pools of num_pages pages of page_size rows (a multiple
   * of 16), laid out [kv_heads][num_pages][page_size][dim] (head-major: a sequence whose pages
   * follow each other in the pool reads as one run), and position p of sequence b is row
   * p % page_size of page block_table[b * block_table_stride + p / page_size]. cache_lens[b]
   * (required) counts the rows sequence b holds: the call writes its kv_len new rows at
   * positions [cache_lens[b], cache_lens[b] + kv_len) (the caller puts their pages in the table
   * first; pages other sequences read must not be among them) and the queries of b attend to
   * its cache_lens[b] + kv_len keys, the call's the newest (align BOTTOM_RIGHT); the caller
   * advances cache_lens. cache_len and cache_capacity are not read; rotary positions count from
   * cache_lens[b]. Not with the ring or kv_lens (the lengths are cache_lens'). */
  const int32_t* block_table;
  int64_t block_table_stride, page_size, num_pages;
  const int32_t* cache_lens;
  /* tessera_mha_create only: a block type (TESSERA_Q8_0, TESSERA_Q4_0) with float32 weights
   * (weight_type TESSERA_F32, in x out as usual) makes the prepared layer quantize each matrix
   * once, along in (tessera_convert's rounding of its transpose), and keep it as block-type
   * weights do; the layer then runs as one created from those blocks. TESSERA_F32 (0, the
   * default): the weights are kept as weight_type says. Calls do not read it. */
  tessera_dtype prepared_weight_type;
} tessera_mha_desc;

/* Self-attention defaults: all dims model_dim-derived, head_dim = value_dim = model_dim/heads,
 * kv_heads = heads, no bias, no cache, window -1/-1, align BOTTOM_RIGHT, no options; weights
 * must then be set. */
TESSERA_API tessera_status tessera_mha_desc_init(tessera_mha_desc* desc, int64_t batch,
                                                 int64_t q_len, int64_t kv_len, int64_t model_dim,
                                                 int64_t heads);
TESSERA_API tessera_status tessera_mha_workspace_size(const tessera_mha_desc* desc, size_t* bytes);
/* workspace may be NULL (then it comes from the calling thread's scratch, see Memory above);
 * otherwise it holds workspace_bytes >= the size reported above, and its contents after any
 * call are unspecified. x_kv may equal x_q (self-attention). A call that fails leaves out, lse
 * and both caches as they were, the rows at [cache_len, cache_len + kv_len) included. */
TESSERA_API tessera_status tessera_mha_forward(const tessera_mha_desc* desc, const float* x_q,
                                               const float* x_kv, float* out, void* workspace,
                                               size_t workspace_bytes);

/* A prepared layer: the weights packed once into the active kernel table's panels (float32
 * weights as tessera_sgemm_pack_b packs them; f16 and bf16 weights as tessera_sgemm_pack_b16
 * does, kept in 16 bits, which a decode step reads at half the bytes; block-type weights as
 * tessera_sgemm_pack_bq does, a quarter or an eighth of them) and the biases copied, so
 * the caller's arrays may be freed.
 * tessera_mha_create reads desc's dimensions (q_in_dim, kv_in_dim, out_dim, the heads and head
 * sizes), weights, biases and weight_type; the other fields are the calls'. The layer is
 * immutable: several threads may run it at once, each with its own workspace. The weights are
 * packed for the kernel table active at creation: after tessera_set_isa selects another,
 * calls fail (TESSERA_INVALID_ARGUMENT naming the layer) until it is created again. */
typedef struct tessera_mha_layer tessera_mha_layer;
TESSERA_API tessera_status tessera_mha_create(const tessera_mha_desc* desc,
                                              tessera_mha_layer** layer);
/* NULL is a no-op. */
TESSERA_API void tessera_mha_destroy(tessera_mha_layer* layer);
/* One call of the layer: desc gives the call's sizes, options and cache; its dimensions must be
 * the layer's, and its weight and bias pointers are not read (they may be NULL). x_k and x_v
 * ([batch][kv_len][kv_in_dim]) give the keys' and the values' inputs: the same array for
 * self-attention (x_k == x_v == x_q) or encoder-decoder attention, two arrays when keys and
 * values come from different sequences. The workspace rules, the failure guarantee and the
 * result are tessera_mha_forward's, which runs the same code on unpacked weights; given a
 * workspace, the call allocates nothing once the calling thread's scratch has grown. */
TESSERA_API tessera_status tessera_mha_layer_workspace_size(const tessera_mha_layer* layer,
                                                            const tessera_mha_desc* desc,
                                                            size_t* bytes);
TESSERA_API tessera_status tessera_mha_layer_forward(const tessera_mha_layer* layer,
                                                     const tessera_mha_desc* desc, const float* x_q,
                                                     const float* x_k, const float* x_v, float* out,
                                                     void* workspace, size_t workspace_bytes);

/* ---- a decoder block: norms, activations, prepared linear and feed-forward layers ------------ */

typedef enum tessera_norm_kind {
  TESSERA_NORM_RMS = 0,
  TESSERA_NORM_LAYER = 1,
  TESSERA_NORM_KIND_MIN_ENUM = -0x7FFFFFFF - 1,
  TESSERA_NORM_KIND_MAX_ENUM = 0x7FFFFFFF
} tessera_norm_kind;
/* Each of `rows` rows of dim values: where residual is given, x += residual first (float32 adds,
 * the sums written to x: a block's h = x + attention(x) and its normalisation in one pass); then
 * y = (x - m) s gain + bias with, for RMS, m = 0 and s = 1 / sqrt(mean(x^2) + eps) (RMSNorm),
 * for LAYER, m = mean(x) and s = 1 / sqrt(mean((x - m)^2) + eps) (LayerNorm, the population
 * variance). gain and bias may be NULL (1 and 0); eps finite and >= 0. y may be x itself (ldy ==
 * ldx); no other overlap among x, residual and y. The sums are float32 over the W floats of the
 * table's vectors (4 to 16): each y within (ceil(dim / W) + W + 8) 2^-24 (|x - m| + |m|) s |gain|
 * + 2^-23 |bias| of the exact normalisation of the stored x (tessera::reference::norm). Rows are
 * split across threads; the same y for any thread count. */
TESSERA_API tessera_status tessera_norm(tessera_norm_kind kind, int64_t rows, int64_t dim, float* x,
                                        int64_t ldx, const float* residual, int64_t ldr,
                                        const float* gain, const float* bias, float eps, float* y,
                                        int64_t ldy);

typedef enum tessera_activation {
  TESSERA_ACT_SILU = 0,      /* g / (1 + e^-g): SwiGLU with up */
  TESSERA_ACT_GELU_TANH = 1, /* 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))): GeGLU */
  TESSERA_ACTIVATION_MIN_ENUM = -0x7FFFFFFF - 1,
  TESSERA_ACTIVATION_MAX_ENUM = 0x7FFFFFFF
} tessera_activation;
/* y = f(gate) up per element (up NULL: f(gate)), `rows` rows of dim values. y may be gate or up
 * itself (equal ld); no other overlap. SiLU within 8 2^-24 |y|; GELU within 8 2^-24 |y| +
 * |0.5 g up| 2^-24 (6 (1 - t^2) |z| + 4), z the tanh's argument, t = tanh(z)
 * (tessera::reference::glu). */
TESSERA_API tessera_status tessera_glu(tessera_activation act, int64_t rows, int64_t dim,
                                       const float* gate, int64_t ldg, const float* up, int64_t ldu,
                                       float* y, int64_t ldy);

/* A prepared linear layer: y = x W^T + bias, W out_features x in_features in weight_type (a
 * PyTorch Linear's weight as it is, ggml's layout; rows in_features apart; a block type has its
 * blocks along in, in_features a multiple of 32), packed once at creation for the active kernel
 * table, so that the caller's arrays may go: float32 into tessera_sgemm_pack_b's panels, f16 and
 * bf16 kept in 16 bits (tessera_sgemm_pack_b16), q8_0 and q4_0 in the integer tile's panels
 * (tessera_sgemm_pack_bq). One call serves 1 row (a decode step) or a whole prompt. */
typedef struct tessera_linear_desc {
  int64_t in_features, out_features;
  tessera_dtype weight_type;
  const void* weight;
  const float* bias; /* out_features, or NULL */
} tessera_linear_desc;
typedef struct tessera_linear tessera_linear;
TESSERA_API tessera_status tessera_linear_create(const tessera_linear_desc* desc,
                                                 tessera_linear** linear);
TESSERA_API void tessera_linear_destroy(tessera_linear* linear);
/* y = x W^T + bias + beta y for `rows` rows (x in_features floats, ldx apart; y out_features,
 * ldy apart): tessera_sgemm_packed's result on the packed weight (a block type: each row of x
 * rounded to q8_0, within tessera_gemm_ex's bound), then the bias added. beta = 0 never reads y;
 * beta = 1 adds to it (a residual stream). y must not overlap x. The table that packed the layer
 * must be active (otherwise TESSERA_INVALID_ARGUMENT: create it again). */
TESSERA_API tessera_status tessera_linear_forward(const tessera_linear* linear, int64_t rows,
                                                  const float* x, int64_t ldx, float beta, float* y,
                                                  int64_t ldy);

/* A prepared feed-forward layer: FFN(x) = (f(x W_gate^T + b_gate) (x W_up^T + b_up)) W_down^T +
 * b_down (gated: SwiGLU with TESSERA_ACT_SILU, GeGLU with GELU_TANH), or f(x W_up^T + b_up)
 * W_down^T + b_down (gated = 0; w_gate unused). W_gate and W_up hidden x dim, W_down dim x
 * hidden, all of weight_type in tessera_linear_desc's layout (block types: dim and hidden
 * multiples of 32). gate and up are packed as one matrix, read in one pass over the input. */
typedef struct tessera_ffn_desc {
  int64_t dim, hidden;
  tessera_activation activation;
  int gated;
  tessera_dtype weight_type;
  const void *w_gate, *w_up, *w_down;
  const float *b_gate, *b_up, *b_down; /* or NULL */
} tessera_ffn_desc;
typedef struct tessera_ffn tessera_ffn;
TESSERA_API tessera_status tessera_ffn_create(const tessera_ffn_desc* desc, tessera_ffn** ffn);
TESSERA_API void tessera_ffn_destroy(tessera_ffn* ffn);
/* Bytes of workspace tessera_ffn_forward needs for `rows` rows (rows x hidden floats, twice that
 * gated); 0 for bad arguments. */
TESSERA_API size_t tessera_ffn_workspace_size(const tessera_ffn* ffn, int64_t rows);
/* y = FFN(x) + beta y for `rows` rows of dim floats (beta = 1: y the residual stream, x its
 * normalisation): the linear layers' products and tessera_glu, in that order. workspace NULL:
 * allocated by the call; otherwise at least tessera_ffn_workspace_size bytes, 64-byte aligned.
 * y must not overlap x or the workspace. */
TESSERA_API tessera_status tessera_ffn_forward(const tessera_ffn* ffn, int64_t rows, const float* x,
                                               int64_t ldx, float beta, float* y, int64_t ldy,
                                               void* workspace, size_t workspace_bytes);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_TESSERA_H */
