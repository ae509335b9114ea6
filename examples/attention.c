/* Causal self-attention over 2 heads from C, with every error checked the way an embedded
 * application would. Build: cc attention.c -ltessera -ltbb -lstdc++ -lm */
#include <math.h>
#include <stdio.h>

#include "tessera/tessera.h"

enum { HEADS = 2, LEN = 6, DIM = 4 };

int main(void) {
  float q[HEADS * LEN * DIM], k[HEADS * LEN * DIM], v[HEADS * LEN * DIM], o[HEADS * LEN * DIM];
  float lse[HEADS * LEN];
  for (int i = 0; i < HEADS * LEN * DIM; ++i) {
    q[i] = sinf(0.1f * i);
    k[i] = cosf(0.2f * i);
    v[i] = (float)(i % 7) - 3.0f;
  }
  tessera_attention_desc d;
  tessera_status s = tessera_attention_desc_init(&d, 1, HEADS, HEADS, LEN, LEN, DIM, DIM);
  if (s != TESSERA_OK) {
    fprintf(stderr, "%s: %s\n", tessera_status_string(s), tessera_last_error());
    return 1;
  }
  d.causal = 1;
  d.lse = lse;
  s = tessera_attention(&d, q, k, v, o);
  if (s != TESSERA_OK) {
    fprintf(stderr, "%s: %s\n", tessera_status_string(s), tessera_last_error());
    return 1;
  }
  printf("kernel table: %s\n", tessera_isa_name());
  for (int i = 0; i < LEN; ++i)
    printf("head 0 query %d: o[0] = %+.5f  lse = %+.5f\n", i, o[i * DIM], lse[i]);
  /* Causal query 0 sees only key 0, so its output is v_0. */
  return fabsf(o[0] - v[0]) < 1e-6f ? 0 : 1;
}
