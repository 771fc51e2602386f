/*
 * Random numbers from the kernel's source (getrandom), for whatever must
 * differ between processes and be unpredictable: tokens, keys, jitter.
 */
#ifndef COMB_RANDOM_H
#define COMB_RANDOM_H

#include <stddef.h>

/* Fills buf with len random bytes. Returns 0, or COMB_EIO when the kernel
 * cannot supply them. */
int comb_random_bytes(void *buf, size_t len);

/* A uniformly distributed number in [0, n) for n > 0 (0 when the kernel
 * cannot supply randomness). */
unsigned comb_random_below(unsigned n);

/* Writes 2 * bytes random lowercase hex digits and a NUL into out, which
 * holds at least 2 * bytes + 1 characters. Returns 0 or COMB_EIO. */
int comb_random_hex(char *out, size_t bytes);

#endif
