/* Comma-separated lists in settings (see comb/list.h). */
#include <string.h>

#include "comb/error.h"
#include "comb/list.h"

int comb_list_next(const char **cursor, char *out, size_t outlen)
{
	const char *p = *cursor;

	while (*p) {
		size_t n = strcspn(p, ",");
		size_t lead = strspn(p, " \t");
		size_t len;

		*cursor = p + n + (p[n] == ',');
		if (lead >= n) {
			p = *cursor;
			continue;
		}
		len = n - lead;
		while (len > 0 && (p[lead + len - 1] == ' ' || p[lead + len - 1] == '\t'))
			len--;
		if (len >= outlen)
			return COMB_ETOOBIG;
		memcpy(out, p + lead, len);
		out[len] = '\0';
		return 1;
	}
	*cursor = p;
	return 0;
}
