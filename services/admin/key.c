/* comb-admin key generate: a new secret key and its public key, in hex. */
#include <string.h>

#include "admin.h"
#include "comb/event.h"
#include "comb/hex.h"

static int generate(void)
{
	unsigned char seckey[32];
	char sec_hex[65], pub_hex[65];

	if (comb_key_generate(seckey) || comb_key_public(seckey, pub_hex)) {
		fprintf(stderr, "comb-admin: key generation failed\n");
		return ADMIN_FAILED;
	}
	comb_hex_encode(seckey, sizeof(seckey), sec_hex);
	printf("%s\n%s\n", sec_hex, pub_hex);
	memset(seckey, 0, sizeof(seckey));
	memset(sec_hex, 0, sizeof(sec_hex));
	return ADMIN_OK;
}

int admin_key(int argc, char **argv)
{
	if (argc < 2)
		return admin_usage_error("key", "a key subcommand is required");
	if (admin_is_help(argv[1])) {
		admin_usage(stdout, "key");
		return ADMIN_OK;
	}
	if (strcmp(argv[1], "generate"))
		return admin_usage_error("key", "unknown key subcommand '%s'",
					 argv[1]);
	if (argc == 3 && admin_is_help(argv[2])) {
		admin_usage(stdout, "key generate");
		return ADMIN_OK;
	}
	if (argc != 2)
		return admin_usage_error("key generate",
					 "key generate takes no arguments");
	return generate();
}
