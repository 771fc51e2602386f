/* Comma-separated lists in settings (COMB_CAPTURE_ENDPOINT and the like). */
#ifndef COMB_LIST_H
#define COMB_LIST_H

#include <stddef.h>

/*
 * Copies the next item of the comma-separated list at *cursor into out
 * (outlen bytes), without the spaces and tabs around it, skipping empty
 * items, and advances *cursor past it. Returns 1 for an item, 0 at the end
 * of the list, COMB_ETOOBIG when an item does not fit in out.
 */
int comb_list_next(const char **cursor, char *out, size_t outlen);

#endif
