/*
 * comb-capture's clock: the monotonic milliseconds every timer of the loop
 * (lock retries, pings, heartbeats, grace periods) is measured in.
 */
#include <time.h>

#include "capture.h"

int64_t capture_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
