/* Compiled as C: the header is valid C99 and the library links from a C program. */
#include <stdio.h>
#include <string.h>

#include "tessera/tessera.h"

int main(void) {
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  float c[4];
  tessera_attention_desc d;
  if (tessera_sgemm(TESSERA_NO_TRANS, TESSERA_NO_TRANS, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2) !=
          TESSERA_OK ||
      c[0] != 19.0f || c[3] != 50.0f) {
    fprintf(stderr, "sgemm from C failed: %s\n", tessera_last_error());
    return 1;
  }
  if (tessera_attention_desc_init(&d, 1, 1, 1, 2, 2, 2, 2) != TESSERA_OK || d.window_left != -1) {
    fprintf(stderr, "desc init from C failed\n");
    return 1;
  }
  if (tessera_softmax(1, 2, a, 2, c, 2, 1.0f / 0.0f) != TESSERA_INVALID_ARGUMENT ||
      strstr(tessera_last_error(), "scale") == NULL) {
    fprintf(stderr, "bad scale not reported from C\n");
    return 1;
  }
  {
    /* A prepared layer from C: one head of width 2, identity weights: out = the one value row. */
    const float eye[4] = {1, 0, 0, 1}, x[2] = {0.5f, -2.0f};
    float out[2] = {0, 0};
    tessera_mha_desc m;
    tessera_mha_layer* layer = NULL;
    if (tessera_mha_desc_init(&m, 1, 1, 1, 2, 1) != TESSERA_OK) return 1;
    m.w_q = m.w_k = m.w_v = m.w_o = eye;
    if (tessera_mha_create(&m, &layer) != TESSERA_OK ||
        tessera_mha_layer_forward(layer, &m, x, x, x, out, NULL, 0) != TESSERA_OK ||
        out[0] != 0.5f || out[1] != -2.0f) {
      fprintf(stderr, "prepared layer from C failed: %s\n", tessera_last_error());
      return 1;
    }
    tessera_mha_destroy(layer);
  }
  printf("C API ok (isa %s)\n", tessera_isa_name());
  return 0;
}
