/* An application built out of tree against an installed Tessera (find_package or pkg-config):
 * a small GEMM and a causal attention call through the C API, each checked, then one line naming
 * the version and the kernel table. Exits non-zero on any mismatch. */
#include <math.h>
#include <stdio.h>
#include <tessera/tessera.h>

static int check(const char* what, tessera_status s) {
  if (s == TESSERA_OK) return 0;
  fprintf(stderr, "consumer: %s failed: %s\n", what, tessera_last_error());
  return 1;
}

int main(void) {
  const float a[6] = {1, 2, 3, 4, 5, 6}; /* 2 x 3 */
  const float b[6] = {1, 0, 0, 1, 1, 1}; /* 3 x 2 */
  float c[4] = {0};
  if (check("sgemm", tessera_sgemm(TESSERA_NO_TRANS, TESSERA_NO_TRANS, 2, 2, 3, 1.0f, a, 3, b, 2,
                                   0.0f, c, 2)))
    return 1;
  const float want[4] = {4, 5, 10, 11};
  for (int i = 0; i < 4; ++i)
    if (c[i] != want[i]) {
      fprintf(stderr, "consumer: sgemm c[%d] = %g, want %g\n", i, c[i], want[i]);
      return 1;
    }

  /* One head, 3 queries and keys of dimension 2, causal: query 0 sees key 0 only. */
  const float q[6] = {1, 0, 0, 1, 1, 1}, k[6] = {1, 0, 0, 1, 1, 1}, v[6] = {1, 2, 3, 4, 5, 6};
  float o[6];
  tessera_attention_desc d;
  if (check("desc", tessera_attention_desc_init(&d, 1, 1, 1, 3, 3, 2, 2))) return 1;
  d.causal = 1;
  if (check("attention", tessera_attention(&d, q, k, v, o))) return 1;
  if (fabsf(o[0] - 1.0f) > 1e-6f || fabsf(o[1] - 2.0f) > 1e-6f) {
    fprintf(stderr, "consumer: attention row 0 = (%g, %g), want (1, 2)\n", o[0], o[1]);
    return 1;
  }
  if (tessera_version_number() != TESSERA_VERSION) {
    fprintf(stderr, "consumer: headers %d, library %d\n", TESSERA_VERSION,
            tessera_version_number());
    return 1;
  }
  printf("consumer ok: tessera %s, kernel table %s\n", tessera_version(), tessera_isa_name());
  return 0;
}
