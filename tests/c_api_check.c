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
  printf("C API ok (isa %s)\n", tessera_isa_name());
  return 0;
}
