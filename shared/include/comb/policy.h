/*
 * The comb policy plugin ABI, version 1. A policy plugin is a shared object
 * that includes only this header and exports one function,
 * COMB_POLICY_ENTRY, returning a static descriptor. The host checks the
 * descriptor's magic, ABI major version and size before calling anything in
 * it, and treats every error or unknown answer as a denial.
 *
 * Decisions are made over finite facts (a channel's visibility, type and
 * flags, the actor's role in it, whether the request names it), never over
 * database rows, so the host can evaluate a plugin's read rule for every
 * combination of facts up front and let the database filter with it.
 *
 * Compatibility: new fields are only ever added at the end of a struct;
 * each struct that may grow starts with (or carries) its size.
 */
#ifndef COMB_POLICY_H
#define COMB_POLICY_H

#include <stdint.h>

#define COMB_POLICY_MAGIC UINT64_C(0x314c4f50424d4f43) /* "COMBPOL1" */
#define COMB_POLICY_ABI_MAJOR 1
#define COMB_POLICY_ABI_MINOR 0
#define COMB_POLICY_ENTRY "comb_policy_entry"

enum comb_verdict {
	COMB_ABSTAIN = 0, /* no opinion: the next plugin decides; all abstain: deny */
	COMB_ALLOW = 1,
	COMB_DENY = 2,
};

enum comb_visibility {
	COMB_VIS_OPEN = 0,
	COMB_VIS_UNLISTED = 1,
	COMB_VIS_PRIVATE = 2,
};

/* The actor's standing in a channel; NONE also covers removed members. */
enum comb_role {
	COMB_ROLE_NONE = 0,
	COMB_ROLE_MEMBER = 1,
	COMB_ROLE_ADMIN = 2,
	COMB_ROLE_OWNER = 3,
};

enum comb_action {
	COMB_ACT_READ = 0,            /* read the channel's events and artifacts */
	COMB_ACT_WRITE = 1,           /* post kind 9; create, update or move artifacts */
	COMB_ACT_CREATE_CHANNEL = 2,  /* 9007; channel is NULL */
	COMB_ACT_PUT_USER = 3,        /* 9000 */
	COMB_ACT_REMOVE_USER = 4,     /* 9001; see target_is_self */
	COMB_ACT_EDIT_METADATA = 5,   /* 9002 */
	COMB_ACT_REDACT = 6,          /* 9005 */
	COMB_ACT_DELETE_CHANNEL = 7,  /* 9008 */
	COMB_ACT_JOIN = 8,            /* 9021 */
	COMB_ACT_LEAVE = 9,           /* 9022 (the core keeps the last owner) */
	COMB_ACT_DELETE_ARTIFACT = 10,/* artifact delete or restore; see actor_is_creator */
};

/* Finite facts about one channel and the actor's relation to it. */
struct comb_policy_channel {
	enum comb_visibility visibility; /* a DM is always private */
	int is_dm;
	int archived;
	int deleted;
	enum comb_role role;  /* the actor's active role in this channel */
	int named;            /* the request names this channel in #h */
};

struct comb_policy_actor {
	const char *pubkey;   /* 64 lowercase hex, borrowed */
	int community_admin;  /* named when the community was created */
};

struct comb_policy_request {
	uint32_t size;        /* sizeof(struct comb_policy_request) of the host */
	enum comb_action action;
	const struct comb_policy_actor *actor;
	const struct comb_policy_channel *channel; /* NULL for CREATE_CHANNEL */
	int target_is_self;   /* REMOVE_USER: the removed user is the actor */
	int actor_is_creator; /* DELETE_ARTIFACT: the actor created the artifact */
	int is_dm;            /* CREATE_CHANNEL: a DM is being created */
};

enum comb_policy_log_level {
	COMB_POLICY_LOG_DEBUG = 0,
	COMB_POLICY_LOG_INFO = 1,
	COMB_POLICY_LOG_WARN = 2,
	COMB_POLICY_LOG_ERROR = 3,
};

/* Services the host lends a plugin; plugins never link against the host. */
struct comb_policy_host {
	uint32_t size;        /* sizeof(struct comb_policy_host) of the host */
	void (*log)(enum comb_policy_log_level level, const char *message);
	int64_t (*now)(void); /* unix seconds */
};

struct comb_policy {
	uint64_t magic;       /* COMB_POLICY_MAGIC */
	uint16_t abi_major;   /* COMB_POLICY_ABI_MAJOR */
	uint16_t abi_minor;   /* COMB_POLICY_ABI_MINOR */
	uint32_t size;        /* sizeof(struct comb_policy) of the plugin */
	const char *name;     /* unique among loaded plugins */
	const char *version;
	/* Called once before any decision. config is the plugin's text from
	 * COMB_POLICY_CONFIG (may be empty, never NULL). Returns 0 on success;
	 * anything else refuses the plugin. *state is passed to decide. */
	int (*init)(const struct comb_policy_host *host, const char *config,
		    void **state);
	/* Returns a comb_verdict. Must be pure and thread-safe: it is called
	 * from many threads and its read answers are cached per actor. */
	int (*decide)(void *state, const struct comb_policy_request *request);
	/* Called once at shutdown. May be NULL. */
	void (*destroy)(void *state);
};

typedef const struct comb_policy *(*comb_policy_entry_fn)(void);

#endif
