// Policy plugins (ARCHITECTURE.md "Plugins cannot break the core"): the
// same requests against relay nodes that share one database but load
// different plugin chains. Under the default plugin alone an outsider reads
// nothing of a private channel; with the auditor plugin chained in front,
// the configured auditor reads it (never a DM) and can write nothing. A
// chain where every plugin abstains denies everything. A relay given any
// plugin the loader must refuse exits non-zero and says why.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
	buildDir, newKey, post, runRelayUntilExit, signEvent, startRelay,
} from './lib/harness.mjs';

const lib = (name) => path.join(buildDir, 'lib', name);
const DEFAULT = lib('policy_default.so');
const AUDITOR = lib('policy_auditor.so');

const auditor = newKey();
const bob = newKey(); // an ordinary user, member of nothing
const alice = newKey(); // a DM participant
const NODES = { default: 0, auditor: 1, abstain: 2 };

let stack;
let admin;
let priv;     // a private channel
let open;     // an open channel
let dm;       // a DM between the admin and alice
let privMsg;
let dmMsg;

function authOpts() {
	return { nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] } };
}

async function send(node, sk, template) {
	const ev = signEvent(sk, { content: crypto.randomBytes(4).toString('hex'), ...template });
	const r = await post(stack.urls[node], '/events', ev, sk, authOpts());
	return { ev, status: r.status, json: r.json() };
}

async function accept(node, sk, template) {
	const res = await send(node, sk, template);
	assert.deepEqual({ status: res.status, json: res.json },
		{ status: 200, json: { id: res.ev.id, accepted: true, message: '' } });
	return res.ev;
}

async function assertRefused(res, status, message) {
	assert.deepEqual({ status: res.status, json: res.json },
		{ status, json: { id: res.ev.id, accepted: false, message } });
	const rows = await stack.query(`SELECT count(*) FROM events WHERE id = '${res.ev.id}'`);
	assert.deepEqual(rows, [['0']], 'a refused event is not stored');
}

async function readIds(node, sk, filter) {
	const r = await post(stack.urls[node], '/query', [filter], sk, authOpts());
	assert.equal(r.status, 200, r.body);
	return r.json().map((e) => e.id);
}

async function count(node, sk, filter) {
	const r = await post(stack.urls[node], '/count', [filter], sk, authOpts());
	assert.equal(r.status, 200, r.body);
	return r.json().count;
}

before(async () => {
	stack = await startRelay({
		nodes: 3,
		nodeEnv: [
			{ COMB_POLICY_PLUGIN: DEFAULT },
			{ COMB_POLICY_PLUGIN: `${AUDITOR}:${DEFAULT}`, COMB_POLICY_CONFIG: `auditors=${auditor.pk}` },
			{ COMB_POLICY_PLUGIN: lib('test_abstain_all.so') },
		],
	});
	admin = stack.admins[0];
	priv = crypto.randomUUID();
	open = crypto.randomUUID();
	dm = crypto.randomUUID();
	await accept(NODES.default, admin, { kind: 9007, tags: [['h', priv], ['name', 'private'], ['visibility', 'private']] });
	await accept(NODES.default, admin, { kind: 9007, tags: [['h', open], ['name', 'open']] });
	await accept(NODES.default, admin, { kind: 9007, tags: [['h', dm], ['name', 'dm'], ['type', 'dm'], ['p', alice.pk]] });
	privMsg = await accept(NODES.default, admin, { kind: 9, tags: [['h', priv]], content: 'private words' });
	dmMsg = await accept(NODES.default, alice.sk, { kind: 9, tags: [['h', dm]], content: 'dm words' });
});

after(async () => {
	await stack?.stop();
});

describe('default and auditor chains on one database', () => {
	test('each node logs the plugins it loaded', () => {
		const logs = stack.logs.relays.map((f) => fs.readFileSync(f, 'utf8'));
		assert.match(logs[0], new RegExp(`policy 'default' 1\\.0 loaded from ${DEFAULT}`));
		assert.doesNotMatch(logs[0], /policy 'auditor'/);
		assert.match(logs[1], new RegExp(`policy 'auditor' 1\\.0 loaded from ${AUDITOR}`));
		assert.match(logs[1], new RegExp(`policy 'default' 1\\.0 loaded from ${DEFAULT}`));
		assert.match(logs[1], /auditor: 1 auditor configured/);
	});

	test('the auditor reads a private channel only under the auditor chain', async () => {
		const reads = [
			{ '#h': [priv] },
			{ ids: [privMsg.id] },
			{ kinds: [9], authors: [stack.communities[0].owner] },
		];
		for (const filter of reads) {
			assert.deepEqual(await readIds(NODES.default, auditor.sk, filter), [], JSON.stringify(filter));
			assert.ok((await readIds(NODES.auditor, auditor.sk, filter)).includes(privMsg.id), JSON.stringify(filter));
		}
		assert.equal(await count(NODES.default, auditor.sk, { '#h': [priv], kinds: [9] }), 0);
		assert.equal(await count(NODES.auditor, auditor.sk, { '#h': [priv], kinds: [9] }), 1);
	});

	test('DMs stay for their participants, auditor or not', async () => {
		for (const node of [NODES.default, NODES.auditor]) {
			assert.deepEqual(await readIds(node, auditor.sk, { '#h': [dm] }), []);
			assert.deepEqual(await readIds(node, auditor.sk, { ids: [dmMsg.id] }), []);
			assert.deepEqual(await readIds(node, alice.sk, { ids: [dmMsg.id] }), [dmMsg.id]);
		}
	});

	test('everyone else is decided by the default plugin on both nodes', async () => {
		for (const node of [NODES.default, NODES.auditor]) {
			assert.deepEqual(await readIds(node, bob.sk, { '#h': [priv] }), []);
			assert.deepEqual(await readIds(node, admin, { ids: [privMsg.id] }), [privMsg.id]);
			await assertRefused(await send(node, bob.sk, { kind: 9, tags: [['h', priv]] }), 403,
				'restricted: not a channel member');
			await accept(node, bob.sk, { kind: 9, tags: [['h', open]] });
		}
	});

	test('the auditor can write nothing under the auditor chain', async () => {
		const n = NODES.auditor;
		await assertRefused(await send(n, auditor.sk, { kind: 9, tags: [['h', priv]] }), 403,
			'restricted: not a channel member');
		await assertRefused(await send(n, auditor.sk, { kind: 9, tags: [['h', open]] }), 403,
			'restricted: not a channel member');
		await assertRefused(await send(n, auditor.sk, { kind: 9021, tags: [['h', open]] }), 403,
			'restricted: not allowed to join this channel');
		await assertRefused(await send(n, auditor.sk, { kind: 9005, tags: [['h', priv], ['e', privMsg.id]] }), 403,
			'restricted: not allowed to redact events in this channel');
		await assertRefused(await send(n, auditor.sk, { kind: 9000, tags: [['h', priv], ['p', bob.pk]] }), 403,
			'restricted: not allowed to add members to this channel');
		await assertRefused(await send(n, auditor.sk, { kind: 9007, tags: [['h', crypto.randomUUID()], ['name', 'x']] }), 403,
			'restricted: not allowed to create channels');
		// Under the default plugin alone the same key is an ordinary user.
		await accept(NODES.default, auditor.sk, { kind: 9, tags: [['h', open]] });
		await assertRefused(await send(NODES.default, auditor.sk, { kind: 9, tags: [['h', priv]] }), 403,
			'restricted: not a channel member');
	});

	test('a chain where every plugin abstains denies everything', async () => {
		const n = NODES.abstain;
		assert.deepEqual(await readIds(n, admin, { ids: [privMsg.id] }), []);
		assert.deepEqual(await readIds(n, bob.sk, { '#h': [open] }), []);
		await assertRefused(await send(n, admin, { kind: 9007, tags: [['h', crypto.randomUUID()], ['name', 'x']] }), 403,
			'restricted: not allowed to create channels');
		await assertRefused(await send(n, admin, { kind: 9, tags: [['h', open]] }), 403,
			'restricted: not a channel member');
		// Events without a channel are the author's own, whatever the policy.
		const del = await accept(n, bob.sk, { kind: 5, tags: [['e', 'ab'.repeat(32)]] });
		assert.deepEqual(await readIds(n, bob.sk, { ids: [del.id] }), [del.id]);
	});
});

// Runs comb-relay with plugin as COMB_POLICY_PLUGIN until it exits (at
// most 20 s). Resolves to {code, signal, output}.
function runRelay(plugin, config = '') {
	return runRelayUntilExit({ COMB_POLICY_PLUGIN: plugin, COMB_POLICY_CONFIG: config });
}

describe('plugins the loader refuses', () => {
	const cases = [
		['test_bad_magic.so', /bad magic/, 'bad_magic'],
		['test_bad_major.so', /unsupported abi major 2/, 'bad_major'],
		['test_no_entry.so', /no entry symbol comb_policy_entry/, null],
		['test_small_size.so', /descriptor size \d+ too small/, 'small_size'],
		['test_empty_name.so', /empty name/, 'empty_name'],
		['test_init_fail.so', /init failed/, null],
	];
	for (const [file, reason, neverInit] of cases) {
		test(`${file} stops the relay`, async () => {
			const plugin = lib(file);
			assert.ok(fs.existsSync(plugin), `${plugin} is built`);
			const r = await runRelay(plugin);
			assert.equal(r.signal, null, r.output);
			assert.ok(typeof r.code === 'number' && r.code !== 0, `exit status ${r.code}\n${r.output}`);
			assert.match(r.output, new RegExp(`policy plugin ${plugin.replace(/[.]/g, '\\.')}: ${reason.source}`));
			assert.doesNotMatch(r.output, /listening on/);
			if (neverInit)
				assert.doesNotMatch(r.output, new RegExp(`test plugin ${neverInit}: init called`));
		});
	}

	test('init_fail is refused after its init ran, and never destroyed', async () => {
		const r = await runRelay(lib('test_init_fail.so'));
		assert.match(r.output, /test plugin init_fail: init called/);
		assert.doesNotMatch(r.output, /test plugin init_fail: destroy called/);
	});

	test('two plugins with one name stop the relay', async () => {
		const r = await runRelay(`${lib('test_dup_a.so')}:${lib('test_dup_b.so')}`);
		assert.ok(r.code !== 0, r.output);
		assert.match(r.output, /duplicate name/);
		assert.doesNotMatch(r.output, /listening on/);
	});

	test('a missing plugin file stops the relay', async () => {
		const missing = lib('no_such_plugin.so');
		const r = await runRelay(missing);
		assert.ok(r.code !== 0, r.output);
		assert.match(r.output, /cannot load/);
	});

	test('the auditor plugin with a bad configuration stops the relay', async () => {
		for (const config of ['', 'auditors=', `auditors=${'A'.repeat(64)}`, `auditors=${auditor.pk},${auditor.pk}`]) {
			const r = await runRelay(`${AUDITOR}:${DEFAULT}`, config);
			assert.ok(r.code !== 0, `${config}: ${r.output}`);
			assert.match(r.output, /auditor: bad config/);
			assert.match(r.output, /init failed/);
		}
	});
});
