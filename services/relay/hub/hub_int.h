/*
 * What the files of hub/ call of each other: the subscriptions' signal
 * entry (subs.c) applies admin changes to the readers (readers.c) first.
 */
#ifndef COMB_HUB_INT_H
#define COMB_HUB_INT_H

#include "comb/signal.h"

/* Sets the status of every registered reader an admin signal names
 * (other signals: nothing). Only takes a lock held briefly. */
void readers_apply_admin(const struct comb_signal *s);

#endif
