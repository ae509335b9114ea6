/* Tessera's version: the one place it is written (CMakeLists.txt reads it from here). */
#ifndef TESSERA_VERSION_H
#define TESSERA_VERSION_H

#define TESSERA_VERSION_MAJOR 0
#define TESSERA_VERSION_MINOR 3
#define TESSERA_VERSION_PATCH 1
/* One number that compares: 10000 major + 100 minor + patch. */
#define TESSERA_VERSION \
  (TESSERA_VERSION_MAJOR * 10000 + TESSERA_VERSION_MINOR * 100 + TESSERA_VERSION_PATCH)

#endif
