/* Deadlines for pthread_cond_timedwait and friends, and the monotonic
 * milliseconds that timers and durations are measured in. */
#ifndef COMB_CLOCK_H
#define COMB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Sets *ts to ms milliseconds from now on clock (the clock the waiting
 * condition variable was created with). */
void comb_deadline_in(struct timespec *ts, clockid_t clock, int ms);

/* Milliseconds of CLOCK_MONOTONIC: the difference of two readings is the
 * time between them; a reading alone is no date. */
int64_t comb_monotonic_ms(void);

#endif
