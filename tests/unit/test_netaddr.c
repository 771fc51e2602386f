/*
 * Unit tests for client addresses (comb/netaddr.h): parsing addresses and
 * trusted-proxy lists, range membership, and the choice of the client
 * address from the peer and X-Forwarded-For.
 */
#include "test_util.h"

#include <sys/socket.h>

#include "comb/error.h"
#include "comb/netaddr.h"

static void test_parse_and_format(void **state)
{
	struct comb_netaddr a;
	char text[COMB_NETADDR_TEXT];

	(void)state;
	assert_int_equal(comb_netaddr_parse("127.0.0.2", 9, &a), 0);
	assert_int_equal(a.family, AF_INET);
	comb_netaddr_format(&a, text, sizeof(text));
	assert_string_equal(text, "127.0.0.2");
	assert_int_equal(comb_netaddr_parse("[2001:DB8::1]", 13, &a), 0);
	assert_int_equal(a.family, AF_INET6);
	comb_netaddr_format(&a, text, sizeof(text));
	assert_string_equal(text, "2001:db8::1");
	/* an IPv4-mapped IPv6 address is the IPv4 one */
	assert_int_equal(comb_netaddr_parse("::ffff:10.1.2.3", 15, &a), 0);
	assert_int_equal(a.family, AF_INET);
	comb_netaddr_format(&a, text, sizeof(text));
	assert_string_equal(text, "10.1.2.3");
	assert_int_equal(comb_netaddr_parse("", 0, &a), COMB_EINVAL);
	assert_int_equal(comb_netaddr_parse("1.2.3.4:80", 10, &a), COMB_EINVAL);
	assert_int_equal(comb_netaddr_parse("unknown", 7, &a), COMB_EINVAL);
	assert_int_equal(comb_netaddr_parse("1.2.3.256", 9, &a), COMB_EINVAL);
}

static void test_ranges(void **state)
{
	struct comb_netranges r;
	struct comb_netaddr a;
	char err[128];

	(void)state;
	assert_int_equal(comb_netranges_parse(" 10.0.0.0/8, 192.168.1.7 ,fd00::/8,", &r,
					      err, sizeof(err)), 0);
	assert_int_equal(r.n, 3);
	comb_netaddr_parse("10.200.3.4", 10, &a);
	assert_true(comb_netranges_contains(&r, &a));
	comb_netaddr_parse("11.0.0.1", 8, &a);
	assert_false(comb_netranges_contains(&r, &a));
	comb_netaddr_parse("192.168.1.7", 11, &a);
	assert_true(comb_netranges_contains(&r, &a));
	comb_netaddr_parse("192.168.1.8", 11, &a);
	assert_false(comb_netranges_contains(&r, &a));
	comb_netaddr_parse("fd12::5", 7, &a);
	assert_true(comb_netranges_contains(&r, &a));
	comb_netaddr_parse("fe80::1", 7, &a);
	assert_false(comb_netranges_contains(&r, &a));
	comb_netranges_free(&r);

	/* an odd prefix length compares the bits it names */
	assert_int_equal(comb_netranges_parse("172.16.0.0/12", &r, err, sizeof(err)), 0);
	comb_netaddr_parse("172.31.255.255", 14, &a);
	assert_true(comb_netranges_contains(&r, &a));
	comb_netaddr_parse("172.32.0.0", 10, &a);
	assert_false(comb_netranges_contains(&r, &a));
	comb_netranges_free(&r);

	assert_int_equal(comb_netranges_parse("", &r, err, sizeof(err)), 0);
	assert_int_equal(r.n, 0);
	comb_netranges_free(&r);
	for (const char *bad = "10.0.0.0/33\0" "10.0.0.0/\0" "::/129\0" "proxy\0" "10.0.0.0/8x\0";
	     *bad; bad += strlen(bad) + 1) {
		assert_int_equal(comb_netranges_parse(bad, &r, err, sizeof(err)), COMB_EINVAL);
		assert_non_null(strstr(err, "not an address"));
	}
}

/* The client address for peer and the given X-Forwarded-For headers. */
static const char *client(const struct comb_netranges *r, const char *peer,
			  const char *const *xff, size_t n)
{
	static char out[COMB_NETADDR_TEXT];

	comb_client_address(r, peer, xff, n, out, sizeof(out));
	return out;
}

static void test_client_address(void **state)
{
	struct comb_netranges r;
	char err[128];
	const char *one[] = {"203.0.113.9"};
	const char *spoofed[] = {"1.1.1.1, 203.0.113.9"};
	const char *chain[] = {"203.0.113.9, 10.0.0.5"};
	const char *two_headers[] = {"198.51.100.1", "203.0.113.9, 10.0.0.5"};
	const char *all_trusted[] = {"10.0.0.7, 10.0.0.5"};
	const char *garbage[] = {"203.0.113.9, junk, 10.0.0.5"};
	const char *empty[] = {" , "};

	(void)state;
	assert_int_equal(comb_netranges_parse("10.0.0.0/8", &r, err, sizeof(err)), 0);
	/* an untrusted peer is the client, whatever it forwards */
	assert_string_equal(client(&r, "198.51.100.4", one, 1), "198.51.100.4");
	/* a trusted peer without the header is the client */
	assert_string_equal(client(&r, "10.0.0.1", NULL, 0), "10.0.0.1");
	assert_string_equal(client(&r, "10.0.0.1", empty, 1), "10.0.0.1");
	/* the rightmost untrusted entry: what a client prepends is ignored */
	assert_string_equal(client(&r, "10.0.0.1", one, 1), "203.0.113.9");
	assert_string_equal(client(&r, "10.0.0.1", spoofed, 1), "203.0.113.9");
	assert_string_equal(client(&r, "10.0.0.1", chain, 1), "203.0.113.9");
	assert_string_equal(client(&r, "10.0.0.1", two_headers, 2), "203.0.113.9");
	/* every hop trusted: the leftmost */
	assert_string_equal(client(&r, "10.0.0.1", all_trusted, 1), "10.0.0.7");
	/* an entry that is not an address stops the walk at the hop right of it */
	assert_string_equal(client(&r, "10.0.0.1", garbage, 1), "10.0.0.5");
	/* IPv4-mapped peers count as their IPv4 address */
	assert_string_equal(client(&r, "::ffff:10.0.0.1", one, 1), "203.0.113.9");
	comb_netranges_free(&r);
	/* nothing trusted: always the peer */
	assert_int_equal(comb_netranges_parse("", &r, err, sizeof(err)), 0);
	assert_string_equal(client(&r, "10.0.0.1", one, 1), "10.0.0.1");
	comb_netranges_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_and_format),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_client_address),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
