// The randomized checker of comb-client itself (issue 36, item 1): a seeded
// history of artifact creates, edits, moves (out of the readers' channels
// and back), deletes, restores, and grants and revocations of a channel,
// read through comb-client views that are
//   - in Node with a JSON file store: one on the resumable sync, one on the
//     sync and incremental reads over HTTP with small pages;
//   - in Chromium with IndexedDB (Debian's chromium, as the board test);
// and that, round after round, stay live, go offline, or are closed while
// the history goes on and reopened (reloaded, for the page) in the middle
// of their catch-up. After every round each view must equal a fresh
// `current` read, and so must what its store persisted (read back after a
// reload, or from a second handle on the database).
//
// COMB_SEED picks another history, COMB_CLIENT_ROUNDS the number of rounds
// (default 6); the seed is printed with every failure. Runs in well under
// 90 s on an idle machine.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import WebSocket from 'ws';

import { CombClient, tagValue } from '../../clients/js/index.js';
import { JsonFileStore } from '../../clients/js/src/file-store.js';
import { startBoardServer } from '../../clients/board/serve.mjs';
import { addMember, createChannel, removeMember } from './lib/artifacts.mjs';
import { rng } from './lib/checker.mjs';
import { diffStores, settle, truthFor } from './lib/clients.mjs';
import { newKey, startRelay } from './lib/harness.mjs';

const SEED = Number(process.env.COMB_SEED ?? 3600101);
const ROUNDS = Number(process.env.COMB_CLIENT_ROUNDS ?? 6);
const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
	'--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];
const TYPE = 'demo.task';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let stack, admin, reader, writer, tmp;
let channels;          // [c0 open, c1 private (member), c2 private (membership toggles), c3 open, outside]
let scopeChannels;     // the views' channels: c0, c1, c2
let member = true;     // whether reader is a member of c2 now
const model = new Map();   // d -> the writer's current revision (undefined when deleted)
const deleted = new Map(); // d -> delete revision, for restores

before(async () => {
	stack = await startRelay({ communities: [{ hosts: ['localhost'] }], env: { COMB_WRITE_RATE: '0' } });
	admin = stack.admins[0];
	reader = newKey();
	writer = new CombClient({ url: stack.url, secretKey: admin });
	channels = [
		await createChannel(stack, admin, { name: 'c0', visibility: 'open' }),
		await createChannel(stack, admin, { name: 'c1', visibility: 'private' }),
		await createChannel(stack, admin, { name: 'c2', visibility: 'private' }),
		await createChannel(stack, admin, { name: 'c3', visibility: 'open' }),
	];
	scopeChannels = channels.slice(0, 3);
	await addMember(stack, admin, channels[1], reader.pk);
	await addMember(stack, admin, channels[2], reader.pk);
	tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'comb-client-checker-'));
});

after(async () => {
	await stack?.stop();
	if (tmp)
		fs.rmSync(tmp, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------
// the history

const pick = (random, arr) => arr[Math.floor(random() * arr.length)];

// One writer operation chosen by random; resolves once answered (a
// refusal is part of the history too: nothing is asserted on writes).
async function writeOne(random) {
	const held = [...model.entries()].filter(([, ev]) => ev);
	const x = random();
	try {
		if (x < 0.25 || held.length < 3) {
			const type = random() < 0.85 ? TYPE : 'demo.note';
			const ev = await writer.createArtifact({ h: pick(random, channels), type,
				title: `t${Math.floor(random() * 1e6)}`, tags: [['status', pick(random, ['open', 'doing', 'done'])]] });
			model.set(tagValue(ev, 'd'), ev);
		} else if (x < 0.5) {
			const [d, cur] = pick(random, held);
			model.set(d, await writer.updateArtifact(cur, { title: `t${Math.floor(random() * 1e6)}` }));
		} else if (x < 0.7) {
			// out of the views' channels and back, or between them
			const [d, cur] = pick(random, held);
			const to = pick(random, channels.filter((h) => h !== tagValue(cur, 'h')));
			let ev = await writer.moveArtifact(cur, to);
			if (to === channels[3] && random() < 0.6)
				ev = await writer.moveArtifact(ev, pick(random, scopeChannels));
			model.set(d, ev);
		} else if (x < 0.8) {
			const [d, cur] = pick(random, held);
			deleted.set(d, await writer.deleteArtifact(cur));
			model.set(d, undefined);
		} else if (x < 0.88 && deleted.size) {
			const [d, del] = pick(random, [...deleted.entries()]);
			deleted.delete(d);
			model.set(d, await writer.restoreArtifact(del));
		} else if (x < 0.94) {
			// a removal and an upsert of one d close together
			const [d, cur] = pick(random, held);
			const ev = await writer.deleteArtifact(cur);
			model.set(d, await writer.restoreArtifact(ev));
		} else {
			if (member)
				await removeMember(stack, admin, channels[2], reader.pk);
			else
				await addMember(stack, admin, channels[2], reader.pk);
			member = !member;
		}
	} catch (err) {
		if (err.code === undefined)
			throw err;
	}
}

// The truth for the readers: d -> id from fresh `current` reads of the
// channels of the scope the reader can read now.
async function truth() {
	const out = new Map();
	for (const h of scopeChannels) {
		if (h === channels[2] && !member)
			continue;
		for (const [d, id] of await truthFor(stack.url, reader.sk, { '#h': [h], '#type': [TYPE] }))
			out.set(d, id);
	}
	return out;
}

const idsOf = (events) => new Map(events.filter((e) => !e.pending).map((e) => [tagValue(e, 'd'), e.id]));

// Resolves once fn() (d -> id) equals want; rejects with the difference.
async function converges(fn, want, what, timeoutMs = 30000) {
	const deadline = Date.now() + timeoutMs;
	let diff;
	for (;;) {
		diff = diffStores(await fn(), want);
		if (!diff)
			return;
		if (Date.now() > deadline) {
			// what the writer did last to each d that differs
			const evidence = [...diff.missing, ...diff.extra, ...diff.stale.map((x) => x.split(' ')[0])].map((d) => {
				const ev = model.get(d);
				return `${d}: ${ev ? `${tagValue(ev, 'op')} in c${channels.indexOf(tagValue(ev, 'h'))}` : 'deleted'}`;
			});
			const err = new Error(`seed ${SEED}: ${what} differs from a fresh read: ${JSON.stringify(diff)}; ` +
				`${evidence.join(', ')}; reader ${member ? 'is' : 'is not'} a member of c2`);
			err.ds = [...diff.missing, ...diff.extra, ...diff.stale.map((x) => x.split(' ')[0])];
			throw err;
		}
		await sleep(100);
	}
}

// ---------------------------------------------------------------------------
// the readers: {name, open(), reloadMidCatchUp(), offline(bool), shown(),
// persisted(), close()}

// A Node reader over a JSON file, behind a network switch: offline, every
// fetch fails and every socket drops (new ones are refused).
function nodeReader(name, viewOptions) {
	const file = path.join(tmp, `${name}.json`);
	const net = { online: true, sockets: new Set() };
	// what the reader received, to say what it saw of a d that differs
	const heard = [];
	const hear = (what, text) => {
		heard.push(`${new Date().toISOString().slice(11, 23)} ${what} ${text}`);
		if (heard.length > 5000)
			heard.shift();
	};
	const fetch = async (url, init) => {
		if (!net.online)
			throw new TypeError('fetch failed: offline');
		const res = await globalThis.fetch(url, init);
		const text = await res.text();
		hear(`${init?.body ?? ''} ->`, text);
		return new Response(text, { status: res.status, headers: res.headers });
	};
	class Socket extends WebSocket {
		constructor(url) {
			super(net.online ? url : 'ws://127.0.0.1:9');
			net.sockets.add(this);
			this.on('close', () => net.sockets.delete(this));
			this.on('message', (data) => hear('frame', data.toString()));
		}
	}
	const client = new CombClient({ url: stack.url, secretKey: reader.sk, fetch, WebSocket: Socket });
	const r = {
		name, view: null, reloads: 0,
		open() {
			r.view = client.artifacts({ channels: scopeChannels, types: [TYPE], store: new JsonFileStore(file), ...viewOptions });
			r.view.on('error', (err) => hear('error', err.message));
			r.view.on('status', (status) => hear('status', status));
			r.view.on('change', ({ changes }) => hear('applied', JSON.stringify(changes.map((c) =>
				(c.op === 'upsert' ? `+${tagValue(c.event, 'd')} ${c.event.id.slice(0, 8)}` : `-${c.d} ${c.reason}`)))));
		},
		async close() {
			await r.view?.close();
			r.view = null;
		},
		// reopens, and closes again after the first page or frame of the
		// catch-up is applied (or when it has none), then reopens
		async reloadMidCatchUp() {
			await r.close();
			r.open();
			await new Promise((resolve) => {
				const done = () => resolve();
				r.view.on('change', done).on('status', done);
				setTimeout(done, 3000);
			});
			r.reloads++;
			await r.close();
			r.open();
		},
		offline(off) {
			net.online = !off;
			if (off) {
				for (const ws of net.sockets)
					ws.terminate();
			}
		},
		async shown() {
			return idsOf(r.view.all());
		},
		// what to say when it differs: its state, and what it heard of ds
		state(ds = []) {
			return { status: r.view.status, stats: r.view.stats,
				heard: heard.filter((line) => ds.some((d) => line.includes(d)) || / (status|error) /.test(line))
					.map((line) => line.slice(0, 4000)) };
		},
		// what a fresh handle on the file holds, once the view's writes are in
		async persisted() {
			const { events } = await new JsonFileStore(file).load();
			return idsOf(events);
		},
	};
	return r;
}

// The import map of the board's page, for the checker's blank page.
function importMap() {
	const html = fs.readFileSync(new URL('../../clients/board/index.html', import.meta.url), 'utf8');
	return html.match(/<script type="importmap">[\s\S]*?<\/script>/)[0];
}

// A Chromium page of one browser context, with a view in IndexedDB; the
// context's network emulation takes it offline.
async function browserReader(browser, boardUrl) {
	const context = await browser.newContext();
	const page = await context.newPage();
	const errors = [];
	page.on('pageerror', (err) => errors.push(err.message));
	// The page: a document of the board's server (so the relay on
	// localhost counts as the same address space) with the board's import
	// map and comb-client; a reload reloads that document, and the lab
	// is written into it again.
	const lab = `<!doctype html><meta charset="utf-8">${importMap()}<script type="module">
import { CombClient, IndexedDBStore, tagValue } from 'comb-client';
window.lab = { CombClient, IndexedDBStore, tagValue };
</script>`;
	const show = async (reload) => {
		if (reload)
			await page.reload();
		else
			await page.goto(`${boardUrl}board.css`);
		await page.setContent(lab);
	};
	const config = { url: stack.url, sk: reader.skHex, channels: scopeChannels, type: TYPE };
	const r = {
		name: 'chromium indexeddb', page, errors, reloads: 0,
		async open() {
			await page.waitForFunction(() => window.lab);
			await page.evaluate((c) => {
				const client = new window.lab.CombClient({ url: c.url, secretKey: c.sk });
				window.view = client.artifacts({ channels: c.channels, types: [c.type], store: new window.lab.IndexedDBStore('checker') });
				window.viewErrors = [];
				window.view.on('error', (e) => window.viewErrors.push(e.message));
				window.applied = 0;
				window.view.on('change', () => window.applied++);
			}, config);
		},
		async load() {
			await show(false);
			await r.open();
		},
		async close() {
			await page.evaluate(() => window.view.close());
		},
		// a reload of the page while its catch-up runs: right after the
		// first page or frame applied (or a moment in, when it has none)
		async reloadMidCatchUp() {
			await show(true);
			await r.open();
			await page.waitForFunction(() => window.applied > 0 || window.view.status === 'live', null, { timeout: 5000 })
				.catch(() => {});
			await show(true);
			r.reloads++;
			await r.open();
		},
		async offline(off) {
			await context.setOffline(off);
		},
		// what to say when it differs
		state() {
			return page.evaluate(async (url) => ({ status: window.view.status, stats: window.view.stats,
				errors: window.viewErrors.slice(-5), online: navigator.onLine, href: location.href,
				probe: await fetch(url).then((res) => res.status, (e) => String(e)) }), stack.url);
		},
		async shown() {
			return new Map(await page.evaluate(() => window.view.all().filter((e) => !e.pending)
				.map((e) => [window.lab.tagValue(e, 'd'), e.id])));
		},
		// a second handle on the page's database
		async persisted() {
			return new Map(await page.evaluate(async () => {
				const store = new window.lab.IndexedDBStore('checker');
				const { events } = await store.load();
				await store.close();
				return events.map((e) => [window.lab.tagValue(e, 'd'), e.id]);
			}));
		},
	};
	await r.load();
	return r;
}

// ---------------------------------------------------------------------------
// the rounds

// Runs ROUNDS rounds of the history against readers; in each, every reader
// stays live, goes offline or is closed while the writer writes, and
// afterwards every reader and its store must equal a fresh read.
async function rounds(t, readers, random) {
	const stats = { ops: 0, modes: {} };
	for (let round = 0; round < ROUNDS; round++) {
		const modes = readers.map(() => pick(random, ['live', 'offline', 'closed']));
		for (const [i, r] of readers.entries()) {
			stats.modes[modes[i]] = (stats.modes[modes[i]] ?? 0) + 1;
			if (modes[i] === 'offline')
				await r.offline(true);
			else if (modes[i] === 'closed' && r.close)
				await r.close();
		}
		const n = 15 + Math.floor(random() * 30);
		for (let i = 0; i < n; i++)
			await writeOne(random);
		stats.ops += n;
		for (const [i, r] of readers.entries()) {
			if (modes[i] === 'offline')
				await r.offline(false);
			else if (modes[i] === 'closed')
				await r.reloadMidCatchUp();
		}
		await settle(stack);
		const want = await truth();
		for (const r of readers) {
			try {
				await converges(() => r.shown(), want, `round ${round}: ${r.name}`);
			} catch (err) {
				err.message += `\n${r.name}: ${JSON.stringify(await r.state(err.ds), null, 1)}`;
				throw err;
			}
			await converges(() => r.persisted(), want, `round ${round}: ${r.name}'s store`, 5000);
		}
		t.diagnostic(`round ${round}: ${n} operations, modes ${modes.join(' ')}, ${want.size} artifacts in view`);
	}
	return stats;
}

test(`Node views over a JSON file converge after every reload and offline period (seed ${SEED})`, async (t) => {
	const readers = [
		nodeReader('resumable', {}),
		nodeReader('http', { resumable: false, pageSize: 3, pollInterval: 300 }),
	];
	for (const r of readers)
		r.open();
	const stats = await rounds(t, readers, rng(SEED));
	for (const r of readers) {
		await r.close();
		// a restart from the file alone holds the same
		const again = await r.persisted();
		await converges(async () => again, await truth(), `${r.name} after the last reload`, 1);
	}
	t.diagnostic(`${stats.ops} operations, ${JSON.stringify(stats.modes)}, reloads ${readers.map((r) => r.reloads)}`);
	assert.ok(readers.some((r) => r.reloads > 0) || ROUNDS < 4, 'a reload in the middle of a catch-up took place');
});

const skip = fs.existsSync(CHROMIUM) ? false :
	`${CHROMIUM} is missing: install Debian's chromium (scripts/install-deps.sh does)`;

describe('a Chromium page with IndexedDB', { skip }, () => {
	let board, browser;
	before(async () => {
		const { chromium } = await import('playwright-core');
		board = await startBoardServer({ port: 0 });
		browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
	});
	after(async () => {
		await browser?.close();
		await board?.close();
	});

	test(`the page's view and IndexedDB converge after every reload and offline period (seed ${SEED})`, async (t) => {
		const page = await browserReader(browser, board.url.endsWith('/') ? board.url : `${board.url}/`);
		const stats = await rounds(t, [page], rng(SEED ^ 0x5bd1e995));
		t.diagnostic(`${stats.ops} operations, ${JSON.stringify(stats.modes)}, reloads ${page.reloads}`);
		assert.deepEqual(page.errors, []);
	});
});
