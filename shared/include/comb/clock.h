/* Deadlines for pthread_cond_timedwait and friends. */
#ifndef COMB_CLOCK_H
#define COMB_CLOCK_H

#include <time.h>

/* Sets *ts to ms milliseconds from now on clock (the clock the waiting
 * condition variable was created with). */
void comb_deadline_in(struct timespec *ts, clockid_t clock, int ms);

#endif
