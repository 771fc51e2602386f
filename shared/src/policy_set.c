/*
 * The policy plugin loader and the chain that asks loaded plugins.
 *
 * Plugins are dlopen'ed at start-up from a colon-separated list of paths.
 * Each descriptor is checked before anything in it is called (entry symbol,
 * magic, ABI major, descriptor size, name, duplicate name), then initialised;
 * any refusal unloads everything loaded so far. Decisions go through the
 * chain in order: the first plugin that does not abstain decides, and an
 * answer outside enum comb_verdict, or a chain where every plugin abstains,
 * is a denial. Code is unloaded only by comb_policy_set_free at shutdown.
 */
#include "comb/policy_set.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comb/error.h"
#include "comb/log.h"

/* The descriptor of ABI 1.0 ends with destroy; later minors only grow. */
#define POLICY_V1_0_SIZE                                                       \
	(offsetof(struct comb_policy, destroy) +                               \
	 sizeof(((struct comb_policy *)0)->destroy))

#define PLUGIN_PATH_MAX PATH_MAX

struct loaded_plugin {
	void *handle;			/* owned: from dlopen */
	const struct comb_policy *desc; /* borrowed from the module */
	void *state;			/* owned by the plugin: from init */
	char path[PLUGIN_PATH_MAX];
};

struct comb_policy_set {
	size_t count;
	struct loaded_plugin plugins[COMB_POLICY_MAX_PLUGINS];
	/* Set once a plugin has answered outside the enum, so the denial is
	 * logged once rather than on every request. Separate because the set
	 * is const while deciding. */
	atomic_bool *bogus_logged;
};

static void host_log(enum comb_policy_log_level level, const char *message)
{
	enum comb_log_level l;

	switch (level) {
	case COMB_POLICY_LOG_DEBUG:
		l = COMB_LOG_DEBUG;
		break;
	case COMB_POLICY_LOG_INFO:
		l = COMB_LOG_INFO;
		break;
	case COMB_POLICY_LOG_WARN:
		l = COMB_LOG_WARN;
		break;
	default:
		l = COMB_LOG_ERROR;
		break;
	}
	comb_log(l, "policy plugin: %s", message ? message : "(null)");
}

static int64_t host_now(void)
{
	return (int64_t)time(NULL);
}

/* Lent to every plugin for its whole life, hence static. */
static const struct comb_policy_host host_services = {
	.size = sizeof(struct comb_policy_host),
	.log = host_log,
	.now = host_now,
};

/* Refuses the plugin at path: logs the reason and copies it to errbuf. */
__attribute__((format(printf, 4, 5))) static int
refuse(char *errbuf, size_t errlen, const char *path, const char *fmt, ...)
{
	char reason[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	comb_error("policy plugin %s: %s", path, reason);
	return comb_fail(errbuf, errlen, COMB_EPLUGIN, "policy plugin %s: %s",
			 path, reason);
}

/* Calls destroy (when the plugin was initialised) and unloads the module. */
static void unload(struct loaded_plugin *p)
{
	if (p->desc && p->desc->destroy)
		p->desc->destroy(p->state);
	if (p->handle)
		dlclose(p->handle);
	memset(p, 0, sizeof(*p));
}

/*
 * Loads, checks and initialises the plugin at set->plugins[set->count].
 * On success the plugin counts as loaded; on failure nothing of it stays.
 */
static int load_one(struct comb_policy_set *set, const char *path,
		    const char *config, char *errbuf, size_t errlen)
{
	struct loaded_plugin *p = &set->plugins[set->count];
	const struct comb_policy *d;
	comb_policy_entry_fn entry;
	const char *err;
	void *sym;
	int rc;

	memset(p, 0, sizeof(*p));
	memcpy(p->path, path, strlen(path) + 1);
	dlerror();
	p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!p->handle) {
		err = dlerror();
		rc = refuse(errbuf, errlen, path, "cannot load: %s",
			    err ? err : "unknown error");
		goto out;
	}
	dlerror();
	sym = dlsym(p->handle, COMB_POLICY_ENTRY);
	if (!sym || dlerror()) {
		rc = refuse(errbuf, errlen, path, "no entry symbol %s",
			    COMB_POLICY_ENTRY);
		goto out;
	}
	/* POSIX guarantees a function pointer round-trips through void *. */
	memcpy(&entry, &sym, sizeof(entry));
	d = entry();
	if (!d) {
		rc = refuse(errbuf, errlen, path,
			    "entry returned no descriptor");
		goto out;
	}
	if (d->magic != COMB_POLICY_MAGIC) {
		rc = refuse(errbuf, errlen, path, "bad magic");
		goto out;
	}
	if (d->abi_major != COMB_POLICY_ABI_MAJOR) {
		rc = refuse(errbuf, errlen, path,
			    "unsupported abi major %u (host speaks %d)",
			    (unsigned)d->abi_major, COMB_POLICY_ABI_MAJOR);
		goto out;
	}
	if (d->size < POLICY_V1_0_SIZE) {
		rc = refuse(errbuf, errlen, path,
			    "descriptor size %u too small (abi %d.0 needs %zu)",
			    (unsigned)d->size, COMB_POLICY_ABI_MAJOR,
			    (size_t)POLICY_V1_0_SIZE);
		goto out;
	}
	if (!d->name || !d->name[0]) {
		rc = refuse(errbuf, errlen, path, "empty name");
		goto out;
	}
	for (size_t i = 0; i < set->count; i++) {
		if (strcmp(set->plugins[i].desc->name, d->name) == 0) {
			rc = refuse(
			    errbuf, errlen, path,
			    "duplicate name '%s' (already loaded from %s)",
			    d->name, set->plugins[i].path);
			goto out;
		}
	}
	if (!d->version || !d->version[0]) {
		rc = refuse(errbuf, errlen, path, "empty version");
		goto out;
	}
	if (!d->init || !d->decide) {
		rc = refuse(errbuf, errlen, path, "missing init or decide");
		goto out;
	}
	rc = d->init(&host_services, config, &p->state);
	if (rc != 0) {
		rc = refuse(errbuf, errlen, path, "init failed (%d)", rc);
		goto out;
	}
	p->desc = d; /* from here on unload() calls destroy */
	set->count++;
	comb_info("policy '%s' %s loaded from %s", d->name, d->version, path);
	rc = 0;
out:
	if (rc != 0)
		unload(p);
	return rc;
}

struct comb_policy_set *comb_policy_set_load(const char *paths,
					     const char *config, char *errbuf,
					     size_t errlen)
{
	struct comb_policy_set *set = NULL;
	char path[PLUGIN_PATH_MAX];
	const char *s, *end;
	size_t len;
	int rc;

	if (!config)
		config = "";
	if (!paths || !paths[0]) {
		comb_error("policy plugin: no plugin path configured");
		comb_fail(errbuf, errlen, COMB_EPLUGIN,
			  "policy plugin: no plugin path configured");
		return NULL;
	}
	set = calloc(1, sizeof(*set));
	if (!set) {
		rc = comb_fail(errbuf, errlen, COMB_ENOMEM,
			       "policy plugin: out of memory");
		goto out;
	}
	set->bogus_logged =
	    calloc(COMB_POLICY_MAX_PLUGINS, sizeof(*set->bogus_logged));
	if (!set->bogus_logged) {
		rc = comb_fail(errbuf, errlen, COMB_ENOMEM,
			       "policy plugin: out of memory");
		goto out;
	}
	for (s = paths;; s = end + 1) {
		end = strchr(s, ':');
		if (!end)
			end = s + strlen(s);
		len = (size_t)(end - s);
		if (len == 0) {
			rc = refuse(errbuf, errlen, "list",
				    "empty path in '%s'", paths);
			goto out;
		}
		if (len >= sizeof(path)) {
			rc = refuse(errbuf, errlen, "list",
				    "a path of %zu bytes is over the limit",
				    len);
			goto out;
		}
		memcpy(path, s, len);
		path[len] = '\0';
		if (set->count == COMB_POLICY_MAX_PLUGINS) {
			rc = refuse(errbuf, errlen, path,
				    "too many plugins (at most %d)",
				    COMB_POLICY_MAX_PLUGINS);
			goto out;
		}
		rc = load_one(set, path, config, errbuf, errlen);
		if (rc != 0)
			goto out;
		if (*end == '\0')
			break;
	}
	rc = 0;
out:
	if (rc != 0) {
		comb_policy_set_free(set);
		return NULL;
	}
	return set;
}

void comb_policy_set_free(struct comb_policy_set *set)
{
	if (!set)
		return;
	/* Tear down in reverse order of loading. */
	while (set->count > 0)
		unload(&set->plugins[--set->count]);
	free(set->bogus_logged);
	free(set);
}

bool comb_policy_allows(const struct comb_policy_set *set,
			const struct comb_policy_request *request)
{
	struct comb_policy_request req;

	if (!set || !request || !request->actor || !request->actor->pubkey)
		return false;
	if (!request->channel && request->action != COMB_ACT_CREATE_CHANNEL)
		return false;
	/* Plugins trust size to tell which fields exist; the host knows. */
	req = *request;
	req.size = sizeof(req);
	for (size_t i = 0; i < set->count; i++) {
		const struct loaded_plugin *p = &set->plugins[i];
		int v = p->desc->decide(p->state, &req);

		if (v == COMB_ALLOW)
			return true;
		if (v == COMB_DENY)
			return false;
		if (v == COMB_ABSTAIN)
			continue;
		if (!atomic_exchange(&set->bogus_logged[i], true))
			comb_error("policy '%s' answered %d, not a verdict: "
				   "treated as deny",
				   p->desc->name, v);
		return false;
	}
	return false;
}

int comb_policy_read_key(const struct comb_policy_channel *channel)
{
	unsigned vis = (unsigned)channel->visibility;
	unsigned role = (unsigned)channel->role;

	if (vis > COMB_VIS_PRIVATE || role > COMB_ROLE_OWNER)
		return COMB_EINVAL;
	return (int)(vis | (unsigned)!!channel->is_dm << 2 |
		     (unsigned)!!channel->deleted << 3 |
		     (unsigned)!!channel->archived << 4 | role << 5 |
		     (unsigned)!!channel->named << 7);
}

void comb_policy_read_keys(const struct comb_policy_set *set,
			   const struct comb_policy_actor *actor,
			   int keys[COMB_POLICY_READ_KEYS], int *count)
{
	struct comb_policy_channel ch;
	struct comb_policy_request req;
	int n = 0;

	for (int k = 0; k < COMB_POLICY_READ_KEYS; k++) {
		/* Visibility 3 is no channel at all: never readable. */
		if ((k & 3) > COMB_VIS_PRIVATE)
			continue;
		memset(&ch, 0, sizeof(ch));
		ch.visibility = (enum comb_visibility)(k & 3);
		ch.is_dm = (k >> 2) & 1;
		ch.deleted = (k >> 3) & 1;
		ch.archived = (k >> 4) & 1;
		ch.role = (enum comb_role)((k >> 5) & 3);
		ch.named = (k >> 7) & 1;
		memset(&req, 0, sizeof(req));
		req.size = sizeof(req);
		req.action = COMB_ACT_READ;
		req.actor = actor;
		req.channel = &ch;
		if (comb_policy_allows(set, &req))
			keys[n++] = k;
	}
	*count = n;
}
