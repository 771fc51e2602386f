// Fault tests (issue 7, item 1; the matrix is in docs/reliability.md).
// Each runs a seeded history through the convergence checker
// (lib/checker.mjs) with the fault injected part way, asserts what the
// relay must do while the fault lasts, and then that every client store
// (broad and scoped incremental reads, syncs when the relay serves them)
// equals the server's truth for its reader and that no accepted event was
// lost:
//
//   - comb-capture killed with SIGKILL mid-stream and restarted;
//   - one of two relay nodes killed with SIGKILL while clients read
//     (incremental and sync) from both;
//   - Redis killed and restarted: NIP-98 checks fail closed with 503 and
//     recover, ephemeral delivery recovers (a private redis-server, since
//     the fixture's is shared by tests running in parallel);
//   - PostgreSQL restarted: the relays answer 503 meanwhile and recover
//     without a restart (a private cluster: the fixture's is shared);
//   - a writing transaction held open for 30 s: incremental readers wait
//     for the horizon and never skip (a private cluster too, since the
//     horizon is cluster-wide and would stall every other test);
//   - hostile clients: one that stops reading its socket, one that sends
//     a 10 MB frame, and 1,000 connections opened and dropped; the relay
//     stays healthy and its memory comes back.
//
// COMB_SEED overrides the histories' seeds.

import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';

import {
	buildDir, connectWs, freePort, get, newKey, nip98Header, onExit, openSocket, post, signEvent,
	sourceDir, stackDir, startRelay, supervise,
} from './lib/harness.mjs';
import { accept, createChannel, uuid } from './lib/artifacts.mjs';
import { runChecker, summarize } from './lib/checker.mjs';
import {
	IncrementalStore, SyncStore, pidListeningOn, queryAt, rssKb, tagOf,
} from './lib/clients.mjs';

const execFileP = promisify(execFile);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const SEED = Number(process.env.COMB_SEED ?? 70107);
// No write budget: the histories write faster than a person would.
const RELAY_ENV = { COMB_WRITE_RATE: '0' };
// ASan keeps freed memory in quarantine, so RSS settles higher there.
const SANITIZED = (() => {
	try {
		return /COMB_SANITIZE:BOOL=ON/.test(fs.readFileSync(path.join(buildDir, 'CMakeCache.txt'), 'utf8'));
	} catch {
		return false;
	}
})();
const RSS_SLACK_KB = (SANITIZED ? 64 : 24) * 1024;
// The stacks of the memory tests: a small ASan quarantine, so that freed
// memory shows in RSS as it would without the sanitizer.
// Memory is measured with a pool of 64 worker threads: the default pool
// (1,200) holds a stack per thread that stays resident once a connection
// has used it, which would hide what these tests look for (buffers that
// grow with a slow reader, memory that connections do not give back).
const MEMORY_ENV = {
	...RELAY_ENV,
	COMB_NUM_THREADS: '64',
	ASAN_OPTIONS: [process.env.ASAN_OPTIONS, 'quarantine_size_mb=4', 'thread_local_quarantine_size_kb=64']
		.filter(Boolean).join(':'),
};

// Runs the checker and asserts convergence; returns the report.
async function converge(stack, t, opts) {
	const report = await runChecker(stack, {
		seed: SEED, ops: 240, readers: 3, channels: 5, log: (l) => t.diagnostic(l), ...opts,
	});
	t.diagnostic(summarize(report));
	assert.deepEqual(report.faultErrors, [], 'the fault ran as planned');
	assert.ok(report.ok, report.failures.join('\n'));
	return report;
}

// Polls fn until it resolves truthy; returns how long that took (ms).
async function until(what, fn, timeoutMs = 20000) {
	const t0 = Date.now();
	for (;;) {
		let ok = false;
		try {
			ok = await fn();
		} catch {
			ok = false;
		}
		if (ok)
			return Date.now() - t0;
		if (Date.now() - t0 > timeoutMs)
			throw new Error(`${what}: not within ${timeoutMs} ms`);
		await sleep(100);
	}
}

const nonce = () => ({ nip98: { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] } });

// A signed write through node url, as sk: resolves to the raw answer.
async function tryWrite(url, sk, h) {
	const ev = signEvent(sk, { kind: 9, tags: [['h', h]], content: `probe ${crypto.randomBytes(4).toString('hex')}` });
	const r = await post(url, '/events', ev, sk, { ...nonce(), timeoutMs: 10000 });
	return { ...r, event: ev };
}

// A fresh connection can authenticate, subscribe and get EOSE.
async function wsWorks(url) {
	const c = await connectWs(url, newKey().sk);
	try {
		c.send(['REQ', 'probe', { kinds: [9], limit: 1 }]);
		await c.next((m) => m[0] === 'EOSE' && m[1] === 'probe', 10000);
		return true;
	} finally {
		c.ws.terminate();
	}
}

// --- private servers ------------------------------------------------------

// A private PostgreSQL cluster and Redis (scripts/test-stack.sh) with a
// second instance of the harness bound to them: the module is imported
// again under another URL while COMB_TEST_STACK names the private stack.
async function privateStack(name) {
	const dir = `${stackDir}-faults-${name}-${process.pid}`;
	const env = { ...process.env, COMB_BUILD_DIR: buildDir };
	const script = path.join(sourceDir, 'scripts', 'test-stack.sh');
	// Stopped at exit if the test cannot stop it (test-stack.sh stops what a
	// failed start left running).
	const forget = onExit(() => {
		execFileSync('bash', [script, 'stop', dir], { env, stdio: 'ignore' });
		fs.rmSync(dir, { recursive: true, force: true });
	});
	await execFileP('bash', [script, 'start', dir], { env });
	const saved = process.env.COMB_TEST_STACK;
	process.env.COMB_TEST_STACK = dir;
	let harness;
	try {
		harness = await import(`./lib/harness.mjs?stack=${encodeURIComponent(dir)}`);
	} finally {
		if (saved === undefined)
			delete process.env.COMB_TEST_STACK;
		else
			process.env.COMB_TEST_STACK = saved;
	}
	const stackEnv = harness.readStackEnv();
	const servers = (fn, ...args) => execFileP('bash', ['-c',
		`. "${path.join(sourceDir, 'scripts', 'servers.sh')}" && ${fn} "$@"`, 'servers', ...args], { env });
	return {
		dir,
		harness,
		stackEnv,
		pgDir: fs.realpathSync(path.join(dir, 'pg')),
		pgStop() {
			return servers('comb_pg_stop', this.pgDir);
		},
		pgStart() {
			return servers('comb_pg_start', this.pgDir, stackEnv.PGPORT, '0');
		},
		async stop() {
			await execFileP('bash', [script, 'stop', dir], { env });
			fs.rmSync(dir, { recursive: true, force: true });
			forget();
		},
	};
}

// A redis-server of our own in the foreground, so that it can be killed;
// supervised by the harness, so it never outlives the test.
class PrivateRedis {
	constructor(port) {
		this.port = port;
		this.url = `redis://127.0.0.1:${port}/0`;
		this.child = null;
	}

	async start() {
		this.child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(this.port),
			'--save', '', '--appendonly', 'no', '--protected-mode', 'yes'], { stdio: 'ignore' });
		supervise(this.child);
		await until('redis-server answering', async () => {
			const { stdout } = await execFileP('redis-cli', ['-p', String(this.port), 'ping']);
			return stdout.trim() === 'PONG';
		}, 10000);
	}

	async kill() {
		const child = this.child;
		if (!child || child.exitCode !== null || child.signalCode !== null)
			return;
		const exited = new Promise((r) => child.once('exit', r));
		// supervise() unrefs the child: hold the event loop while we wait.
		child.ref();
		child.kill('SIGKILL');
		await exited;
	}
}

// --- the tests ------------------------------------------------------------

describe('faults', { concurrency: 2 }, () => {
	// Process kills, a private Redis and hostile clients on the fixture's
	// PostgreSQL, one at a time.
	describe('processes and Redis', { concurrency: 1 }, () => {
		test('capture killed with SIGKILL mid-stream and restarted: every store converges', async (t) => {
			const stack = await startRelay({ nodes: 2, env: RELAY_ENV });
			try {
				const report = await converge(stack, t, { schedule: [{ afterOps: 80, fault: 'capture' }] });
				assert.equal(report.faults.capture, 1);
				// incremental reads do not depend on the feed
				for (const s of report.stores.filter((x) => !x.state))
					assert.deepEqual(s.stats.errors, {}, `${s.name} had no failed read`);
			} finally {
				await stack.stop();
			}
		});

		test('a relay node killed with SIGKILL while readers use both: every store converges', async (t) => {
			const stack = await startRelay({ nodes: 2, env: RELAY_ENV });
			try {
				const report = await converge(stack, t, {
					seed: SEED + 1,
					writeGapMs: 40,
					schedule: [{ afterOps: 60, fault: 'node', node: 1, downMs: 1500 }],
				});
				assert.equal(report.faults.node, 1);
				// the stores on node 1 noticed and moved over (or reconnected)
				const moved = report.stores.reduce((n, s) => n + (s.stats.moves ?? 0) + (s.stats.drops ?? 0), 0);
				assert.ok(moved > 0, 'some store was reading from the killed node');
			} finally {
				await stack.stop();
			}
		});

		test('Redis killed and restarted: NIP-98 fails closed with 503, recovers, nothing stored is lost', async (t) => {
			const redis = new PrivateRedis(await freePort());
			await redis.start();
			const stack = await startRelay({
				nodes: 2,
				env: { ...RELAY_ENV, COMB_REDIS_URL: redis.url },
				captureEnv: { COMB_REDIS_URL: redis.url },
			}).catch(async (err) => {
				await redis.kill();
				throw err;
			});
			try {
				const admin = stack.admins[0];
				const h = await createChannel(stack, admin);
				const during = {};
				const hook = async () => {
					await redis.kill();
					// a write: refused with 503 and Retry-After, not stored
					const w = await tryWrite(stack.urls[0], admin, h);
					during.write = w.status;
					assert.equal(w.status, 503, w.body);
					assert.match(JSON.parse(w.body).error, /^error: /);
					assert.match(w.headers['retry-after'] ?? '', /^[0-9]+$/);
					const rows = await stack.query(`SELECT count(*) FROM events WHERE id = '${w.event.id}'`);
					assert.deepEqual(rows, [['0']], 'a refused write is not stored');
					// a read needs NIP-98 too
					const q = await queryAt(stack.urls[1], admin, { artifact: 'incremental' });
					assert.equal(q.status, 503, q.raw);
					// alive, not ready
					assert.equal((await get(stack.urls[0], '/healthz')).status, 200);
					assert.equal((await get(stack.urls[0], '/readyz')).status, 503);
					await sleep(1000);
					await redis.start();
					during.recoveryMs = await until('a write after Redis came back', async () =>
						(await tryWrite(stack.urls[0], admin, h)).status === 200);
				};
				const report = await converge(stack, t, {
					seed: SEED + 2,
					schedule: [{ afterOps: 80, fault: 'redis' }],
					faultHooks: { redis: hook },
				});
				t.diagnostic(`during the outage: write ${during.write}; recovered in ${during.recoveryMs} ms`);
				assert.equal(report.faults.redis, 1);

				// replay protection works again: a token is single use
				const ev = signEvent(admin, { kind: 9, tags: [['h', h]], content: 'once' });
				const auth = await nip98Header(admin, `http://${new URL(stack.url).host}/events`, 'POST', ev,
					{ extraTags: [['nonce', 'fixed']] });
				assert.equal((await post(stack.url, '/events', ev, null, { auth })).status, 200);
				const again = await post(stack.url, '/events', ev, null, { auth });
				assert.equal(again.status, 401, again.body);

				// ephemeral delivery recovers: node 0 to a reader on node 1
				const reader = await connectWs(stack.urls[1], newKey().sk);
				try {
					reader.send(['REQ', 'eph', { kinds: [20001], '#h': [h] }]);
					await reader.next((m) => m[0] === 'EOSE' && m[1] === 'eph', 10000);
					await until('an ephemeral event delivered after the restart', async () => {
						const e = signEvent(admin, { kind: 20001, tags: [['h', h]], content: crypto.randomUUID() });
						const r = await post(stack.urls[0], '/events', e, admin, nonce());
						assert.equal(r.status, 200, r.body);
						await reader.next((m) => m[0] === 'EVENT' && m[2].id === e.id, 1000);
						return true;
					});
				} finally {
					reader.ws.terminate();
				}
			} finally {
				await stack.stop();
				await redis.kill();
			}
		});

		test('a client that stops reading its socket: writers never wait, it is cut off, memory is bounded', async (t) => {
			const stack = await startRelay({ env: MEMORY_ENV });
			try {
				const admin = stack.admins[0];
				const h = await createChannel(stack, admin);
				const pid = pidListeningOn(stack.port);
				const rss0 = rssKb(pid);
				const plain = { kinds: [45010], '#h': [h], limit: 1 };
				const slow = await connectWs(stack.url, newKey().sk);
				const normal = await connectWs(stack.url, newKey().sk);
				const synced = new SyncStore(stack.urls, newKey().sk, [h], { name: 'normal sync' });
				let received = 0;
				try {
					for (const c of [slow, normal]) {
						c.send(['REQ', 'live', plain]);
						await c.next((m) => m[0] === 'EOSE' && m[1] === 'live', 10000);
					}
					slow.send(['REQ', 'sync', { artifact: 'current', '#h': [h] }]);
					await slow.next((m) => m[0] === 'EOSE' && m[1] === 'sync', 10000);
					assert.equal(await synced.open(), 'live');
					normal.ws.on('message', (data) => {
						if (data.toString().startsWith('["EVENT","live"'))
							received++;
					});
					slow.ws.pause();
					const content = 'x'.repeat(40000);
					let worst = 0;
					const n = 400;
					for (let i = 0; i < n; i++) {
						const t0 = Date.now();
						await accept(stack, admin, { d: uuid(), h, op: 'create', content });
						worst = Math.max(worst, Date.now() - t0);
					}
					t.diagnostic(`slowest of ${n} writes of 40 kB: ${worst} ms`);
					assert.ok(worst < 5000, `a write waited ${worst} ms`);
					await until('the reading client got every revision', () => received === n);
					await until('the reading sync holds every artifact', () => synced.items.size === n);
					const rss1 = rssKb(pid);
					t.diagnostic(`relay RSS ${rss0} kB before, ${rss1} kB with the stalled client`);
					assert.ok(rss1 - rss0 < RSS_SLACK_KB + 8 * 1024, `RSS grew by ${rss1 - rss0} kB`);
					slow.ws.resume();
					for (const sub of ['live', 'sync']) {
						// (its socket buffers drain first: generous on a loaded machine)
						const closed = await slow.next((m) => m[0] === 'CLOSED' && m[1] === sub, 30000);
						assert.equal(closed[2], 'resync: slow consumer', sub);
					}
					assert.deepEqual(synced.violations, []);
					assert.ok(await wsWorks(stack.url));
				} finally {
					slow.ws.terminate();
					normal.ws.terminate();
					synced.close();
				}
			} finally {
				await stack.stop();
			}
		});

		test('a client that sends a 10 MB frame is closed with 1009, the relay stays healthy', async (t) => {
			const stack = await startRelay({ env: MEMORY_ENV });
			try {
				const pid = pidListeningOn(stack.port);
				await wsWorks(stack.url);
				const rss0 = rssKb(pid);
				const big = JSON.stringify(['EVENT', { content: 'x'.repeat(10 * 1024 * 1024) }]);
				for (const fragmented of [false, true]) {
					const c = await connectWs(stack.url, newKey().sk);
					if (fragmented) {
						const chunk = 1024 * 1024;
						for (let i = 0; i < big.length; i += chunk)
							c.ws.send(big.slice(i, i + chunk), { fin: i + chunk >= big.length });
					} else {
						c.send(big);
					}
					const { code } = await c.closed;
					if (fragmented) {
						// The relay closes after the first fragment over the
						// limit while the rest is still in flight, so the
						// client may see a reset (1006) instead of the close
						// frame; either way the connection ends.
						assert.ok(code === 1009 || code === 1006, `close code ${code} (fragmented)`);
					} else {
						assert.equal(code, 1009, 'close code (one frame)');
					}
				}
				assert.ok(await wsWorks(stack.url));
				assert.equal((await get(stack.url, '/healthz')).status, 200);
				await sleep(500);
				const rss1 = rssKb(pid);
				t.diagnostic(`relay RSS ${rss0} kB before, ${rss1} kB after two 10 MB messages`);
				assert.ok(rss1 - rss0 < RSS_SLACK_KB, `RSS grew by ${rss1 - rss0} kB`);
			} finally {
				await stack.stop();
			}
		});

		test('1,000 connections opened and dropped: the relay stays healthy and memory comes back', async (t) => {
			const stack = await startRelay({ env: MEMORY_ENV });
			try {
				const pid = pidListeningOn(stack.port);
				let refused = 0, opened = 0;
				// Opens one connection and drops it: half wait for the
				// challenge and authenticate with a subscription, half
				// vanish at once.
				const one = async (i) => {
					try {
						if (i % 2) {
							const c = await connectWs(stack.url, newKey().sk);
							c.send(['REQ', 'x', { kinds: [9], limit: 1 }]);
							await c.next((m) => m[0] === 'EOSE', 10000);
							c.ws.terminate();
						} else {
							const ws = await openSocket(stack.url);
							ws.terminate();
						}
						opened++;
					} catch (err) {
						if (err.status === 503)
							refused++;
						else
							throw err;
					}
				};
				const round = async (n) => {
					for (let i = 0; i < n; i += 25)
						await Promise.all(Array.from({ length: Math.min(25, n - i) }, (_, k) => one(i + k)));
				};
				await round(200);   // warm-up: threads, pools, allocator arenas
				await sleep(1000);
				const rss0 = rssKb(pid);
				await round(1000);
				t.diagnostic(`${opened} connections opened, ${refused} refused with 503 while slots were busy`);
				assert.ok(opened >= 1000, 'most connections were served');
				// every slot came back: 40 connections at once all get in
				await sleep(1500);
				const held = await Promise.all(Array.from({ length: 40 }, () => connectWs(stack.url, newKey().sk)));
				for (const c of held)
					c.ws.terminate();
				assert.ok(await wsWorks(stack.url));
				const w = await tryWrite(stack.url, stack.admins[0], await createChannel(stack, stack.admins[0]));
				assert.equal(w.status, 200, w.body);
				await sleep(1000);
				const rss1 = rssKb(pid);
				t.diagnostic(`relay RSS ${rss0} kB after warm-up, ${rss1} kB after 1,000 more connections`);
				assert.ok(rss1 - rss0 < RSS_SLACK_KB, `RSS grew by ${rss1 - rss0} kB`);
			} finally {
				await stack.stop();
			}
		});
	});

	// A private PostgreSQL cluster: a held transaction, then a restart.
	describe('PostgreSQL', { concurrency: 1 }, () => {
		let priv;
		let stack;

		before(async () => {
			priv = await privateStack('pg');
			stack = await priv.harness.startRelay({ nodes: 2, env: RELAY_ENV });
		});

		after(async () => {
			try {
				await stack?.stop();
			} finally {
				await priv?.stop();
			}
		});

		test('a writing transaction held open for 30 s: incremental readers wait, never skip', async (t) => {
			const admin = stack.admins[0];
			const h = await createChannel(stack, admin);
			const heldD = uuid();
			await accept(stack, admin, { d: heldD, h, op: 'create' });
			const watcher = new IncrementalStore(stack.urls, newKey().sk, { '#h': [h] }, { name: 'watcher' });
			await watcher.sync(stack);
			assert.ok(watcher.items.has(heldD));
			const observed = { duringReads: 0, duringWrites: 0 };
			const hook = async () => {
				// psql keeps the transaction open while we work
				const p = spawn('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', stack.dbUrl], { stdio: ['pipe', 'pipe', 'pipe'] });
				let out = '';
				p.stdout.on('data', (c) => { out += c; });
				p.stderr.on('data', (c) => { out += c; });
				const run = async (sql, mark) => {
					p.stdin.write(`${sql}\n\\echo ${mark}\n`);
					await until(`psql: ${mark}`, () => out.includes(mark), 10000);
				};
				try {
					await run('BEGIN;', 'began');
					await run(`UPDATE artifact_heads SET deleted = true WHERE d = '${heldD}';`, 'stamped');
					// what committed before the hold is read; then nothing
					// newer may be delivered until the transaction ends
					await sleep(300);
					await watcher.pull();
					const stop = Date.now() + 30000;
					const made = [];
					while (Date.now() < stop) {
						made.push(tagOf(await accept(stack, admin, { d: uuid(), h, op: 'create' }), 'd'));
						observed.duringWrites++;
						const seen = await watcher.pull(5);
						observed.duringReads++;
						assert.deepEqual(seen, [], 'nothing past the horizon is delivered');
						assert.ok(watcher.items.has(heldD), 'the held change is not skipped over');
						await sleep(400);
					}
					await run('COMMIT;', 'committed');
					const seen = await watcher.sync(stack);
					assert.deepEqual(seen.filter((c) => c.op === 'remove').map((c) => [c.d, c.reason]),
						[[heldD, 'deleted']]);
					assert.deepEqual(seen.filter((c) => c.op === 'upsert').map((c) => tagOf(c.event, 'd')).sort(),
						made.sort());
				} finally {
					p.stdin.end();
					await new Promise((r) => (p.exitCode !== null ? r() : p.once('exit', r)));
				}
			};
			await converge(stack, t, {
				seed: SEED + 3,
				writeGapMs: 200,
				schedule: [{ afterOps: 30, fault: 'hold30' }],
				faultHooks: { hold30: hook },
			});
			t.diagnostic(`during the hold: ${observed.duringWrites} writes, ${observed.duringReads} reads delivered nothing newer`);
			assert.ok(observed.duringReads >= 10);
		});

		test('PostgreSQL restarted: relays answer 503 meanwhile and recover without a restart', async (t) => {
			const admin = stack.admins[0];
			const h = await createChannel(stack, admin);
			const pids = stack.ports.map((p) => pidListeningOn(p));
			const during = {};
			const hook = async () => {
				await priv.pgStop();
				for (const url of stack.urls) {
					const w = await tryWrite(url, admin, h);
					assert.equal(w.status, 503, w.body);
					assert.match(w.headers['retry-after'] ?? '', /^[0-9]+$/);
					const q = await queryAt(url, admin, { artifact: 'current', '#h': [h] });
					assert.equal(q.status, 503, q.raw);
					assert.equal((await get(url, '/healthz')).status, 200);
					assert.equal((await get(url, '/readyz')).status, 503);
				}
				during.refused = true;
				await sleep(1000);
				await priv.pgStart();
				during.recoveryMs = await until('a write after PostgreSQL came back', async () =>
					(await tryWrite(stack.urls[0], admin, h)).status === 200 &&
					(await tryWrite(stack.urls[1], admin, h)).status === 200);
			};
			const report = await converge(stack, t, {
				seed: SEED + 4,
				schedule: [{ afterOps: 80, fault: 'pg' }],
				faultHooks: { pg: hook },
			});
			t.diagnostic(`recovered in ${during.recoveryMs} ms`);
			assert.equal(report.faults.pg, 1);
			assert.ok(during.refused);
			assert.deepEqual(stack.ports.map((p) => pidListeningOn(p)), pids, 'the same relay processes');
		});
	});
});
