/* check_sustained.h — what the sustained and pulsed load (check_sustained.c) and their judge
 * (check_sustained_judge.c) share: the series' arrays, the phases and the thresholds
 * (docs/CHECK.md "Sustained and pulsed load"). */
#ifndef TANDEM_BENCH_CHECK_SUSTAINED_H
#define TANDEM_BENCH_CHECK_SUSTAINED_H

// The arrays of a series, one entry per sample, in this order (check_series_keys).
enum { K_T, K_SM, K_MEM, K_POWER, K_TEMP, K_THROTTLE, K_TFLOPS, K_PHASE, N_KEYS };
extern const char *const check_series_keys[N_KEYS];
// The phases a sample can be of: calibrate, stress, power (sustained.load), on, off (pulsed.load).
extern const char *const check_series_phases[5];

// Targeted stress holds SUSTAINED_TARGET x the GPU's own calibrated rate and FAILs below
// SUSTAINED_HOLD x that target; over a phase's last fifth against its first, the SM clock may
// drop and the throughput decay by SUSTAINED_DROP at most.
#define SUSTAINED_TARGET 0.8
#define SUSTAINED_HOLD 0.9
#define SUSTAINED_DROP 0.10

// NVML's clocks-event reasons: hw slowdown (0x8); the 9 defined when this was written (0x1ff);
// the largest reading a record may hold (bit 63, NVML's old "unknown", is masked off when read).
#define CHECK_THROTTLE_HW_SLOWDOWN (1ULL << 3)
#define CHECK_THROTTLE_KNOWN 0x1ffULL
#define CHECK_THROTTLE_MAX 9223372036854775808.0

#endif
