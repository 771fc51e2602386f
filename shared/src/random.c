/*
 * Random numbers from getrandom(2): never seeded by hand, so that two
 * processes never draw the same sequence.
 */
#include "comb/random.h"

#include <errno.h>
#include <stdint.h>
#include <sys/random.h>

#include "comb/error.h"
#include "comb/hex.h"

int comb_random_bytes(void *buf, size_t len)
{
	unsigned char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom(p + got, len - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return COMB_EIO;
		}
		got += (size_t)n;
	}
	return 0;
}

unsigned comb_random_below(unsigned n)
{
	uint64_t x;

	if (n == 0 || comb_random_bytes(&x, sizeof(x)))
		return 0;
	/* 64 random bits reduced to n < 2^32: the bias is below 2^-32 */
	return (unsigned)(x % n);
}

int comb_random_hex(char *out, size_t bytes)
{
	unsigned char raw[64];

	if (bytes > sizeof(raw) || comb_random_bytes(raw, bytes))
		return COMB_EIO;
	comb_hex_encode(raw, bytes, out);
	return 0;
}
