/* write_st.h — the hostile-input tests' raw safetensors writer: a header exactly as given (valid
 * or not), then the data bytes, so a test can plant files no well-behaved writer would make. */
#ifndef TANDEM_TEST_WRITE_ST_H
#define TANDEM_TEST_WRITE_ST_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

// DIR/NAME: the 8-byte little-endian header length, the header as given, then `ndata` bytes of
// `data` (zeros where NULL).
static inline void write_st(const char *dir, const char *name, const char *header,
                            const void *data, size_t ndata) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f, "cannot write %s", path);
    if (!f) return;
    uint64_t h = strlen(header);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(h >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, h, f);
    for (size_t i = 0; i < ndata; i++) fputc(data ? ((const unsigned char *)data)[i] : 0, f);
    CHECK_MSG(fclose(f) == 0, "cannot write %s", path);
}

#endif
