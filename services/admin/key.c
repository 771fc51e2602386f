/* comb-admin key generate: a new secret key and its public key, in hex. */
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "comb/event.h"
#include "comb/hex.h"

int admin_key(int argc, char **argv)
{
	unsigned char seckey[32];
	char sec_hex[65], pub_hex[65];

	if (argc != 2 || strcmp(argv[1], "generate")) {
		fprintf(stderr, "usage: comb-admin key generate\n");
		return 2;
	}
	if (comb_key_generate(seckey) || comb_key_public(seckey, pub_hex)) {
		fprintf(stderr, "comb-admin: key generation failed\n");
		return 1;
	}
	comb_hex_encode(seckey, sizeof(seckey), sec_hex);
	printf("%s\n%s\n", sec_hex, pub_hex);
	memset(seckey, 0, sizeof(seckey));
	memset(sec_hex, 0, sizeof(sec_hex));
	return 0;
}
