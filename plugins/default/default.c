/*
 * The default comb access policy: exactly the rules of PROTOCOL.md
 * section 4 ("Channels and membership") and section 10 ("Channels").
 *
 * It never abstains, so it can end a chain. It keeps no state and reads no
 * configuration (the configuration string is shared by every plugin of a
 * chain and ignored here). Decisions depend only on the facts of the request,
 * which keeps them pure and lets the host evaluate every read combination
 * up front. A DM is treated as private whatever its visibility says, and a
 * request this plugin does not understand is denied.
 */
#include <stddef.h>

#include "comb/policy.h"

const struct comb_policy *comb_policy_entry(void);

/* The request layout of ABI 1.0: every field read below exists in it. */
#define REQUEST_V1_0_SIZE                                                      \
	(offsetof(struct comb_policy_request, is_dm) + sizeof(int))

static int default_init(const struct comb_policy_host *host, const char *config,
			void **state)
{
	(void)host;
	(void)config;
	*state = NULL;
	return 0;
}

/* Community admins act as owner of every non-DM channel. */
static int acts_as_owner(const struct comb_policy_actor *actor,
			 const struct comb_policy_channel *ch)
{
	return actor->community_admin && !ch->is_dm;
}

static int is_private(const struct comb_policy_channel *ch)
{
	return ch->is_dm || ch->visibility == COMB_VIS_PRIVATE;
}

static int is_member(const struct comb_policy_channel *ch)
{
	return ch->role != COMB_ROLE_NONE;
}

static int is_channel_admin(const struct comb_policy_channel *ch)
{
	return ch->role == COMB_ROLE_ADMIN || ch->role == COMB_ROLE_OWNER;
}

static int can_read(const struct comb_policy_actor *actor,
		    const struct comb_policy_channel *ch)
{
	if (ch->deleted)
		return 0;
	if (acts_as_owner(actor, ch))
		return 1;
	if (is_private(ch))
		return is_member(ch);
	if (ch->visibility == COMB_VIS_OPEN)
		return 1;
	if (ch->visibility == COMB_VIS_UNLISTED)
		return is_member(ch) || ch->named;
	return 0;
}

static int can_write(const struct comb_policy_actor *actor,
		     const struct comb_policy_channel *ch)
{
	if (!can_read(actor, ch) || ch->archived || ch->deleted)
		return 0;
	if (is_private(ch))
		return is_member(ch) || acts_as_owner(actor, ch);
	return 1;
}

/* Channel owner/admin or community admin, on a channel that still exists. */
static int can_moderate(const struct comb_policy_actor *actor,
			const struct comb_policy_channel *ch)
{
	if (ch->deleted)
		return 0;
	return is_channel_admin(ch) || acts_as_owner(actor, ch);
}

static int decide(const struct comb_policy_request *r)
{
	const struct comb_policy_actor *actor = r->actor;
	const struct comb_policy_channel *ch = r->channel;

	if (r->action == COMB_ACT_CREATE_CHANNEL)
		return actor->community_admin;
	if (!ch)
		return 0;
	switch (r->action) {
	case COMB_ACT_READ:
		return can_read(actor, ch);
	case COMB_ACT_WRITE:
		return can_write(actor, ch);
	case COMB_ACT_PUT_USER:
	case COMB_ACT_EDIT_METADATA:
	case COMB_ACT_REDACT:
		return can_moderate(actor, ch);
	case COMB_ACT_REMOVE_USER:
		if (r->target_is_self && is_member(ch) && !ch->deleted)
			return 1;
		return can_moderate(actor, ch);
	case COMB_ACT_DELETE_CHANNEL:
		if (ch->deleted)
			return 0;
		return ch->role == COMB_ROLE_OWNER || acts_as_owner(actor, ch);
	case COMB_ACT_JOIN:
		return !ch->deleted && !is_private(ch) &&
		       (ch->visibility == COMB_VIS_OPEN ||
			ch->visibility == COMB_VIS_UNLISTED);
	case COMB_ACT_LEAVE:
		return !ch->deleted && is_member(ch);
	case COMB_ACT_DELETE_ARTIFACT:
		return can_write(actor, ch) &&
		       (r->actor_is_creator || is_channel_admin(ch) ||
			acts_as_owner(actor, ch));
	default:
		return 0;
	}
}

static int default_decide(void *state, const struct comb_policy_request *r)
{
	(void)state;
	if (!r || r->size < REQUEST_V1_0_SIZE || !r->actor)
		return COMB_DENY;
	return decide(r) ? COMB_ALLOW : COMB_DENY;
}

static const struct comb_policy descriptor = {
	.magic = COMB_POLICY_MAGIC,
	.abi_major = COMB_POLICY_ABI_MAJOR,
	.abi_minor = COMB_POLICY_ABI_MINOR,
	.size = sizeof(struct comb_policy),
	.name = "default",
	.version = "1.0",
	.init = default_init,
	.decide = default_decide,
	.destroy = NULL,
};

/* The plugin's entry point: returns its static descriptor. */
const struct comb_policy *comb_policy_entry(void)
{
	return &descriptor;
}
