/* emu_check.h — what the emulator's kernel tests share: CHECK (counts a failure, prints it and goes
 * on), CUDA_OK (a runtime call that must succeed, else the test ends), and the three thread orders
 * every check runs in (forward, reverse, random) with their names. */
#ifndef TANDEM_EMU_TESTS_EMU_CHECK_H
#define TANDEM_EMU_TESTS_EMU_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int failures = 0;

#define CHECK(cond, ...)                                           \
    do {                                                           \
        if (!(cond)) {                                             \
            failures++;                                            \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                   \
            printf("\n");                                          \
        }                                                          \
    } while (0)

#define CUDA_OK(call)                                                                          \
    do {                                                                                       \
        const cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                               \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static const tdm_emu::thread_order all_orders[] = {tdm_emu::order_forward, tdm_emu::order_reverse,
                                                   tdm_emu::order_random};

static inline const char *order_name(tdm_emu::thread_order o) {
    return o == tdm_emu::order_forward   ? "forward"
           : o == tdm_emu::order_reverse ? "reverse"
           : o == tdm_emu::order_random  ? "random"
                                         : "warp";
}

#endif
