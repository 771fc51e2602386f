// End-to-end test harness: starts real comb-relay (and, once built,
// comb-capture) processes against a fresh database cloned from the
// `teststack` fixture's migrated template, and talks to them the way a client
// would: events signed by nostr-tools, NIP-98 tokens from nostr-tools' nip98,
// HTTP through node:http (so a test can choose the Host header, which
// decides the community), WebSocket through ws.
//
// Environment (set by CTest, see tests/e2e/tests.cmake):
//   COMB_BUILD_DIR   the build tree holding bin/ and lib/ (default ./build)
//   COMB_TEST_STACK  the fixture directory holding `env` (default BUILD/teststack)
//   COMB_E2E_LOG_LEVEL  log level given to the services (default info)
//
// Every process started here is killed when stop() is called and, failing
// that, when the test process exits; its pid is also recorded under
// STACK/pids so that `scripts/test-stack.sh stop` can reap leftovers. No
// child keeps the test process alive, so a failed test ends at once. Tests
// hand servers they start themselves to supervise() and onExit() for the
// same care. Service output goes to
// STACK/logs/<test>-<database>-<service>.log.

import assert from 'node:assert/strict';
import { spawn, execFile, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import * as nip42 from 'nostr-tools/nip42';
import * as nip98 from 'nostr-tools/nip98';
import { useWebSocketImplementation } from 'nostr-tools/relay';
import WebSocket from 'ws';

// nostr-tools' Relay and SimplePool need a WebSocket class; Node 20 has none.
useWebSocketImplementation(WebSocket);

const execFileP = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));

export const sourceDir = process.env.COMB_SOURCE_DIR || path.resolve(here, '../../..');
export const buildDir = process.env.COMB_BUILD_DIR || path.join(sourceDir, 'build');
export const stackDir = process.env.COMB_TEST_STACK || path.join(buildDir, 'teststack');

const HEALTH_TIMEOUT_MS = 20000;
const READY_TIMEOUT_MS = 20000;
// How long a capture may take to exit after SIGTERM.
const STOP_TIMEOUT_MS = 10000;
// A relay's promise (docs/operations.md, "Stopping a relay node"): it
// exits within COMB_SHUTDOWN_GRACE_MS (default 10 s) plus 5 s for the
// steps after the grace period, else its stop watchdog ends it with
// status 1. The harness waits that long plus what a loaded machine may
// add before it sends SIGKILL.
const RELAY_GRACE_DEFAULT_MS = 10000;
const RELAY_STOP_TAIL_MS = 5000;
const STOP_SCHEDULING_SLACK_MS = 5000;

/** How long the harness waits for a relay started with env to exit. */
function relayStopTimeoutMs(env) {
	const grace = Number(env.COMB_SHUTDOWN_GRACE_MS ?? RELAY_GRACE_DEFAULT_MS);
	return grace + RELAY_STOP_TAIL_MS + STOP_SCHEDULING_SLACK_MS;
}

// ---------------------------------------------------------------------------
// keys and events

/** Bytes of a secret key given as a Uint8Array or 64 hex characters. */
export function toSecretBytes(sk) {
	if (sk instanceof Uint8Array)
		return sk;
	if (typeof sk === 'string' && /^[0-9a-f]{64}$/i.test(sk))
		return Uint8Array.from(Buffer.from(sk, 'hex'));
	throw new TypeError('secret key must be a Uint8Array or 64 hex characters');
}

/** Lowercase hex of bytes. */
export function toHex(bytes) {
	return Buffer.from(bytes).toString('hex');
}

/** A new key pair: {sk: Uint8Array, skHex, pk: hex}. */
export function newKey() {
	const sk = generateSecretKey();
	return { sk, skHex: toHex(sk), pk: getPublicKey(sk) };
}

/** Public key (hex) of a secret key (bytes or hex). */
export function pubkeyOf(sk) {
	return getPublicKey(toSecretBytes(sk));
}

/** Current Unix time in seconds. */
export function now() {
	return Math.floor(Date.now() / 1000);
}

/**
 * Signs an event template with nostr-tools' finalizeEvent. Missing fields
 * default to created_at now, no tags and empty content. The template is not
 * modified.
 */
export function signEvent(sk, template) {
	const t = {
		created_at: now(),
		tags: [],
		content: '',
		...template,
	};
	return finalizeEvent(t, toSecretBytes(sk));
}

/** Lowercase hex SHA-256 of a string or Buffer (UTF-8 for strings). */
export function sha256Hex(data) {
	return crypto.createHash('sha256').update(data).digest('hex');
}

/**
 * A NIP-98 `Authorization` header value ("Nostr <base64>") for one request.
 * `body` is what will be sent: an object or array (sent as JSON.stringify of
 * it) goes through nostr-tools' nip98.getToken, whose payload tag is the
 * SHA-256 of that JSON; a string or Buffer is hashed byte for byte.
 * `opts` can forge tokens for negative tests: createdAt, payloadHash (or
 * null to omit the payload tag), extraTags, kind.
 */
export async function nip98Header(sk, url, method, body, opts = {}) {
	const key = toSecretBytes(sk);
	const forged = opts.createdAt !== undefined || opts.payloadHash !== undefined ||
		opts.extraTags !== undefined || opts.kind !== undefined;
	const isObject = body !== null && body !== undefined && typeof body === 'object' &&
		!Buffer.isBuffer(body) && !(body instanceof Uint8Array);
	if (isObject && !forged) {
		const token = await nip98.getToken(url, method, (e) => finalizeEvent(e, key), true, body);
		return token.startsWith('Nostr ') ? token : `Nostr ${token}`;
	}
	const bytes = isObject ? JSON.stringify(body) : (body ?? '');
	const tags = [['u', url], ['method', method]];
	const hash = opts.payloadHash === undefined ? sha256Hex(bytes) : opts.payloadHash;
	if (hash !== null)
		tags.push(['payload', hash]);
	for (const t of opts.extraTags ?? [])
		tags.push(t);
	const ev = finalizeEvent({
		kind: opts.kind ?? 27235,
		created_at: opts.createdAt ?? now(),
		tags,
		content: '',
	}, key);
	return `Nostr ${Buffer.from(JSON.stringify(ev)).toString('base64')}`;
}

// ---------------------------------------------------------------------------
// HTTP and WebSocket clients

/**
 * One HTTP request. `base` is like http://localhost:7447; `localhost` is
 * dialled as 127.0.0.1 (the relay listens on IPv4 only). opts: method
 * (GET), path (/), headers, body (string, Buffer, or object sent as JSON),
 * host (the Host header; default the host:port of base), timeoutMs.
 * Resolves to {status, headers, body (text), json()} whatever the status.
 */
export function request(base, opts = {}) {
	const u = new URL(base);
	const method = opts.method ?? 'GET';
	let body = opts.body;
	if (body !== undefined && body !== null && typeof body === 'object' &&
	    !Buffer.isBuffer(body) && !(body instanceof Uint8Array))
		body = JSON.stringify(body);
	const headers = { ...(opts.headers ?? {}) };
	headers.host = opts.host ?? u.host;
	if (body !== undefined && body !== null)
		headers['content-length'] = Buffer.byteLength(body);
	const hostname = u.hostname === 'localhost' ? '127.0.0.1' : u.hostname;
	return new Promise((resolve, reject) => {
		const req = http.request({
			hostname,
			port: u.port || 80,
			method,
			path: opts.path ?? '/',
			headers,
			agent: false,
			timeout: opts.timeoutMs ?? 30000,
		}, (res) => {
			const chunks = [];
			res.on('data', (c) => chunks.push(c));
			res.on('end', () => {
				const text = Buffer.concat(chunks).toString('utf8');
				resolve({
					status: res.statusCode,
					headers: res.headers,
					body: text,
					json() {
						return JSON.parse(text);
					},
				});
			});
			res.on('error', reject);
		});
		req.on('timeout', () => req.destroy(new Error(`${method} ${opts.path ?? '/'} timed out`)));
		req.on('error', reject);
		if (body !== undefined && body !== null)
			req.write(body);
		req.end();
	});
}

/** GET base+path; opts as for request(). */
export function get(base, urlPath, opts = {}) {
	return request(base, { ...opts, method: 'GET', path: urlPath });
}

/**
 * GETs base's /metrics (base as for request(), a relay's or a capture's
 * metrics listener), asserts status 200 and parses the Prometheus text
 * format: blank and `#` lines are skipped; a series is the text before a
 * line's last space, as written ('comb_x' or 'comb_x{path="a"}'), its
 * value the Number of the rest. Resolves to:
 *   text, headers   the response's body and headers
 *   series          Map: series -> number
 *   value(series)   its number; fails the test when /metrics lacks it
 *   sum(name)       the sum of every series of metric `name` (name itself
 *                   and name{...}), 0 when there is none
 */
export async function scrapeMetrics(base) {
	const r = await get(base, '/metrics');
	assert.equal(r.status, 200, `GET ${base}/metrics: ${r.body}`);
	const series = new Map();
	for (const line of r.body.split('\n')) {
		if (line.trim() === '' || line.startsWith('#'))
			continue;
		const i = line.lastIndexOf(' ');
		series.set(line.slice(0, i), Number(line.slice(i + 1)));
	}
	return {
		text: r.body,
		headers: r.headers,
		series,
		value(s) {
			assert.ok(series.has(s), `${base}/metrics lacks ${s}`);
			return series.get(s);
		},
		sum(name) {
			let total = 0;
			for (const [s, v] of series) {
				if (s === name || s.startsWith(`${name}{`))
					total += v;
			}
			return total;
		},
	};
}

/**
 * POST base+path with a NIP-98 Authorization signed by `sk` (omit sk, or
 * pass null, to send none). The token's `u` tag is http://<Host><path>,
 * where Host is opts.host or the host:port of base; opts.url overrides it.
 * opts.auth (a prepared header value) replaces the generated token;
 * opts.nip98 is passed to nip98Header for forged tokens.
 */
export async function post(base, urlPath, body, sk, opts = {}) {
	const u = new URL(base);
	const host = opts.host ?? u.host;
	const headers = { 'content-type': 'application/json', ...(opts.headers ?? {}) };
	if (opts.auth !== undefined) {
		headers.authorization = opts.auth;
	} else if (sk) {
		const url = opts.url ?? `http://${host}${urlPath}`;
		// NIP-98 tokens are single use: a nonce keeps two identical
		// requests within one second apart, unless a test forges its own.
		const nip98Opts = opts.nip98 ?? { extraTags: [['nonce', crypto.randomBytes(8).toString('hex')]] };
		headers.authorization = await nip98Header(sk, url, opts.method ?? 'POST', body, nip98Opts);
	}
	return request(base, { ...opts, method: opts.method ?? 'POST', path: urlPath, body, headers, host });
}

/**
 * Opens a WebSocket to a relay (`base` as http:// or ws:// URL), with the
 * Host header opts.host (default the host:port of base). Resolves to the
 * open ws socket; rejects with err.status set when the server refuses the
 * upgrade. opts.headers adds request headers; opts.onSocket(ws) is called
 * before the handshake, so listeners it adds miss no message.
 */
export function openSocket(base, opts = {}) {
	const u = new URL(base);
	const hostname = u.hostname === 'localhost' ? '127.0.0.1' : u.hostname;
	const target = `ws://${hostname}:${u.port}${opts.path ?? '/'}`;
	const headers = { ...(opts.headers ?? {}), host: opts.host ?? u.host };
	return new Promise((resolve, reject) => {
		const ws = new WebSocket(target, { headers, handshakeTimeout: opts.timeoutMs ?? 10000,
			localAddress: opts.localAddress });
		opts.onSocket?.(ws);
		ws.once('open', () => resolve(ws));
		ws.once('unexpected-response', (_req, res) => {
			const chunks = [];
			res.on('data', (c) => chunks.push(c));
			res.on('end', () => {
				const err = new Error(`websocket upgrade refused with ${res.statusCode}`);
				err.status = res.statusCode;
				err.body = Buffer.concat(chunks).toString('utf8');
				ws.terminate();
				reject(err);
			});
		});
		ws.once('error', reject);
	});
}

/**
 * Wraps a ws socket in a queue of the NIP-01 messages it receives (parsed
 * JSON arrays; anything else as {raw}). Returns a client with:
 *   send(msg)             sends msg (JSON.stringify unless a string)
 *   next(pred, ms)        the first message, queued or coming, for which
 *                         pred is true (removed from the queue); rejects
 *                         after ms (default 5000)
 *   none(pred, ms)        resolves after ms when no message matched pred,
 *                         rejects with the one that did
 *   drain()               returns and empties the queue
 *   closed                resolves to {code, reason} when the socket closes
 *   close()               starts the closing handshake, resolves as closed
 */
export function wsClient(ws) {
	const queue = [];
	const waiters = [];
	const client = { ws, queue };
	client.closed = new Promise((resolve) => {
		ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() }));
	});
	ws.on('message', (data) => {
		const text = data.toString('utf8');
		let msg;
		try {
			msg = JSON.parse(text);
		} catch {
			msg = { raw: text };
		}
		const i = waiters.findIndex((w) => w.pred(msg));
		if (i >= 0) {
			const [w] = waiters.splice(i, 1);
			w.settle(msg);
		} else {
			queue.push(msg);
		}
	});
	client.send = (msg) => ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
	const wait = (pred, ms, onMatch, onTimeout) => new Promise((resolve, reject) => {
		const i = queue.findIndex(pred);
		if (i >= 0) {
			onMatch(queue.splice(i, 1)[0], resolve, reject);
			return;
		}
		const w = { pred };
		w.timer = setTimeout(() => {
			waiters.splice(waiters.indexOf(w), 1);
			onTimeout(resolve, reject);
		}, ms);
		w.settle = (msg) => {
			clearTimeout(w.timer);
			onMatch(msg, resolve, reject);
		};
		waiters.push(w);
	});
	client.next = (pred = () => true, ms = 5000) => wait(pred, ms,
		(msg, resolve) => resolve(msg),
		(_resolve, reject) => reject(new Error(`no matching message within ${ms} ms; ` +
			`queued: ${JSON.stringify(queue).slice(0, 600)}`)));
	client.none = (pred, ms) => wait(pred, ms,
		(msg, _resolve, reject) => reject(new Error(`unexpected message ${JSON.stringify(msg).slice(0, 600)}`)),
		(resolve) => resolve());
	client.drain = () => queue.splice(0);
	client.close = (code, reason) => {
		ws.close(code, reason);
		return client.closed;
	};
	return client;
}

/**
 * Opens a WebSocket like openSocket and waits for the relay's
 * ["AUTH",<challenge>]; with a secret key `sk` it then authenticates
 * (NIP-42, relay tag ws://<Host>) and expects ["OK",id,true,""]. Resolves to
 * a wsClient with `challenge` (and `pubkey` when authenticated) set.
 */
export async function connectWs(base, sk, opts = {}) {
	let client;
	const ws = await openSocket(base, { ...opts, onSocket: (s) => { client = wsClient(s); } });
	const auth = await client.next((m) => m[0] === 'AUTH', opts.timeoutMs ?? 5000);
	client.challenge = auth[1];
	if (sk) {
		const host = opts.host ?? new URL(base).host;
		const ev = finalizeEvent(nip42.makeAuthEvent(`ws://${host}`, client.challenge),
			toSecretBytes(sk));
		client.send(['AUTH', ev]);
		const ok = await client.next((m) => m[0] === 'OK' && m[1] === ev.id);
		if (ok[2] !== true) {
			ws.terminate();
			throw new Error(`AUTH refused: ${ok[3]}`);
		}
		client.pubkey = ev.pubkey;
	}
	return client;
}

// ---------------------------------------------------------------------------
// the fixture's servers

/**
 * Runs comb-relay on the fixture's PostgreSQL and Redis (a fresh key, a
 * free port, the default policy plugin, the sanitizers' settings; `env`
 * adds or overrides settings) until it exits, at most 20 s: for settings
 * a relay must refuse at start. Resolves to {code, signal, output}.
 */
export async function runRelayUntilExit(env = {}) {
	const stackEnv = readStackEnv();
	const full = { PATH: process.env.PATH };
	for (const [k, v] of Object.entries(process.env)) {
		if (k.startsWith('ASAN_') || k.startsWith('UBSAN_') || k.startsWith('LSAN_'))
			full[k] = v;
	}
	Object.assign(full, {
		COMB_DATABASE_URL: `${stackEnv.COMB_TEST_DATABASE_URL_BASE}/postgres`,
		COMB_REDIS_URL: stackEnv.COMB_REDIS_URL,
		COMB_RELAY_SECRET_KEY: newKey().skHex,
		COMB_LISTEN: `127.0.0.1:${await freePort()}`,
		COMB_POLICY_PLUGIN: path.join(buildDir, 'lib', 'policy_default.so'),
	}, env);
	return new Promise((resolve) => {
		execFile(path.join(buildDir, 'bin', 'comb-relay'), [], { env: full, timeout: 20000 },
			(err, stdout, stderr) => {
				resolve({
					code: err ? err.code : 0,
					signal: err ? err.signal : null,
					output: `${stdout}${stderr}`,
				});
			});
	});
}

/** Reads STACK/env (KEY=value lines) written by scripts/test-stack.sh. */
export function readStackEnv() {
	const file = path.join(stackDir, 'env');
	let text;
	try {
		text = fs.readFileSync(file, 'utf8');
	} catch {
		throw new Error(`${file} is missing: the teststack fixture is not running ` +
			'(run through ctest, or scripts/test-stack.sh start ' + stackDir + ')');
	}
	const env = {};
	for (const line of text.split('\n')) {
		const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
		if (m)
			env[m[1]] = m[2];
	}
	return env;
}

/** Runs psql with `args` (after the connection's) on database `db` of the
 * fixture's PostgreSQL (or of the one on port `port`); resolves to stdout,
 * or fails naming `sql`. */
async function psql(db, args, sql, port) {
	const stackEnv = { ...readStackEnv(), ...(port ? { PGPORT: port } : {}) };
	const conn = ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
		'-h', stackEnv.PGHOST, '-p', stackEnv.PGPORT, '-U', stackEnv.PGUSER ?? 'postgres',
		'-d', db];
	try {
		const { stdout } = await execFileP('psql', [...conn, ...args],
			{ env: { ...process.env, PGCONNECT_TIMEOUT: '10' }, maxBuffer: 64 << 20 });
		return stdout;
	} catch (err) {
		throw new Error(`psql failed on ${db}: ${err.stderr || err.message}\n${sql}`);
	}
}

/** Runs SQL with psql on database `db` of the fixture's PostgreSQL (or of
 * the one on port `port`); resolves to stdout. */
export async function psqlOn(db, sql, port = undefined) {
	return psql(db, ['-c', sql], sql, port);
}

/**
 * Resolves to {db, url}: a database of the fixture's Redis (which has
 * COMB_TEST_REDIS_DATABASES of them, scripts/test-stack.sh) that no other
 * stack of this run uses until all but database 0, which holds the
 * counter handing them out, have been given, and its URL; so that one
 * test's keys and ephemeral events (whose pub/sub channel names the
 * database) never reach another test's relays.
 */
async function privateRedis(stackEnv) {
	const { stdout } = await execFileP('redis-cli', ['-h', '127.0.0.1', '-p', stackEnv.COMB_TEST_REDIS_PORT,
		'INCR', 'comb-test:databases-handed-out']);
	const db = 1 + (Number(stdout.trim()) - 1) % (Number(stackEnv.COMB_TEST_REDIS_DATABASES) - 1);
	if (!Number.isInteger(db))
		throw new Error(`the fixture's Redis did not count (${stdout}) or its env lacks COMB_TEST_REDIS_DATABASES`);
	return { db, url: stackEnv.COMB_REDIS_URL.replace(/\/\d+$/, `/${db}`) };
}

const FS = '\u001f';
const RS = '\u001e';
const NULL_MARK = '\\N';

/**
 * Runs one SQL statement on `db` of the fixture's PostgreSQL (or of the one
 * on port `port`); resolves to its rows as arrays of strings (SQL NULL as
 * null).
 */
export async function queryOn(db, sql, port = undefined) {
	const out = (await psql(db, ['-P', `fieldsep=${FS}`, '-P', `recordsep=${RS}`,
		'-P', `null=${NULL_MARK}`, '-c', sql], sql, port)).replace(/\n$/, '');
	if (out === '')
		return [];
	return out.split(RS).map((r) => r.split(FS).map((v) => (v === NULL_MARK ? null : v)));
}

/**
 * The ids of the events `stack` stored whose h tags do not name their
 * channel (comb_event_channel_ok, migrations/0010_reads_planned_once.sql):
 * plain filters read "#h" by channel, so every write path keeps this empty.
 */
export async function strayChannelEvents(stack) {
	const rows = await stack.query(
		'SELECT id FROM events e WHERE NOT comb_event_channel_ok(e.seq, e.channel_id)');
	return rows.map((r) => r[0]);
}

/**
 * A psql session on database db whose statements a test feeds one at a
 * time, so that it can hold a transaction open between two steps of
 * another writer. run(sql) resolves once psql has executed sql (and
 * rejects when it did not within 10 s); output() is everything psql
 * printed; close() ends the session (an open transaction is rolled back).
 */
export function psqlSession(db) {
	const env = readStackEnv();
	const p = spawn('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', env.PGHOST,
		'-p', env.PGPORT, '-U', env.PGUSER ?? 'postgres', db], { stdio: ['pipe', 'pipe', 'pipe'] });
	let out = '';
	let n = 0;
	p.stdout.on('data', (c) => { out += c; });
	p.stderr.on('data', (c) => { out += c; });
	const exited = new Promise((r) => p.on('exit', r));
	return {
		async run(sql) {
			const marker = `-- done ${++n} --`;
			const from = out.length;
			p.stdin.write(`${sql}\n\\echo '${marker}'\n`);
			for (let i = 0; i < 1000 && !out.includes(marker, from); i++)
				await new Promise((r) => setTimeout(r, 10));
			if (!out.includes(marker, from))
				throw new Error(`psql did not finish ${sql.slice(0, 80)}: ${out.slice(from)}`);
			return out.slice(from, out.indexOf(marker, from)).trim();
		},
		output: () => out,
		async close() {
			p.stdin.end();
			await exited;
		},
	};
}

/** A TCP port that was free on 127.0.0.1 a moment ago. */
export function freePort() {
	return new Promise((resolve, reject) => {
		const srv = net.createServer();
		srv.unref();
		srv.on('error', reject);
		srv.listen(0, '127.0.0.1', () => {
			const { port } = srv.address();
			srv.close(() => resolve(port));
		});
	});
}

function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

// Processes still running, killed on exit whatever happens to the test, and
// synchronous cleanups (private servers) run at the same moment.
const live = new Set();
const exitCleanups = new Set();

function pidFile(pid) {
	return path.join(stackDir, 'pids', String(pid));
}

function killAllNow() {
	for (const p of live) {
		try {
			p.child.kill('SIGKILL');
		} catch {
			// already gone
		}
		try {
			fs.unlinkSync(pidFile(p.child.pid));
		} catch {
			// never written or already removed
		}
	}
	live.clear();
}

function cleanUpNow() {
	killAllNow();
	for (const fn of exitCleanups) {
		try {
			fn();
		} catch (err) {
			process.stderr.write(`harness: cleanup at exit failed: ${err.message}\n`);
		}
	}
	exitCleanups.clear();
}

process.on('exit', cleanUpNow);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
	process.once(sig, () => {
		cleanUpNow();
		process.kill(process.pid, sig);
	});
}

/**
 * Runs fn, which must be synchronous, when the test process exits or is
 * stopped by a signal, for servers a test starts outside startRelay (a
 * private PostgreSQL cluster, say). Returns a function that forgets fn, for
 * when the test stopped them itself.
 */
export function onExit(fn) {
	exitCleanups.add(fn);
	return () => exitCleanups.delete(fn);
}

/**
 * Supervises a child process: it no longer keeps the test process alive
 * (a failed test ends at once instead of waiting for its timeout), it is
 * killed with SIGKILL when the test process exits, and its pid is recorded
 * under STACK/pids so that `scripts/test-stack.sh stop` reaps it should
 * even that fail. Returns {child, exited: null, exitPromise}; `exited`
 * becomes {code, signal} (or {error}) when the child is gone. Call
 * child.ref() before awaiting exitPromise with nothing else pending, or
 * the event loop may end first.
 */
export function supervise(child) {
	const p = { child, exited: null };
	p.exitPromise = new Promise((resolve) => {
		child.once('exit', (code, signal) => {
			p.exited = { code, signal };
			live.delete(p);
			try {
				fs.unlinkSync(pidFile(child.pid));
			} catch {
				// not recorded
			}
			resolve(p.exited);
		});
		child.once('error', (err) => {
			p.exited = { code: null, signal: null, error: err };
			live.delete(p);
			resolve(p.exited);
		});
	});
	child.unref();
	live.add(p);
	if (child.pid) {
		fs.mkdirSync(path.join(stackDir, 'pids'), { recursive: true });
		fs.writeFileSync(pidFile(child.pid), `${child.spawnfile}\n`);
	}
	return p;
}

function testName() {
	const main = process.argv[1] ? path.basename(process.argv[1]) : 'node';
	return main.replace(/\.test\.mjs$/, '').replace(/\.m?js$/, '');
}

function logTail(file, lines = 40) {
	try {
		const text = fs.readFileSync(file, 'utf8').split('\n');
		return text.slice(-lines).join('\n');
	} catch {
		return '(no log)';
	}
}

// Environment for a service: ours, without any COMB_* the caller's shell had.
function serviceEnv(extra) {
	const env = {};
	for (const [k, v] of Object.entries(process.env)) {
		if (!k.startsWith('COMB_'))
			env[k] = v;
	}
	for (const [k, v] of Object.entries(extra)) {
		if (v === null || v === undefined)
			delete env[k];
		else
			env[k] = String(v);
	}
	return env;
}

// A supervised child process writing to its own log file.
function spawnService(bin, args, env, logFile) {
	fs.mkdirSync(path.dirname(logFile), { recursive: true });
	const fd = fs.openSync(logFile, 'a');
	let child;
	try {
		child = spawn(bin, args, { env, stdio: ['ignore', fd, fd] });
	} finally {
		fs.closeSync(fd);
	}
	const p = supervise(child);
	p.logFile = logFile;
	return p;
}

// Stops a service; resolves to a complaint string, or null when it exited
// cleanly (status 0, or killed by the signal we sent).
async function stopService(p, name, signal = 'SIGTERM') {
	const timeoutMs = p.stopTimeoutMs ?? STOP_TIMEOUT_MS;
	if (!p.exited) {
		p.child.kill(signal);
		let timer;
		const t = new Promise((r) => {
			timer = setTimeout(() => r('timeout'), timeoutMs);
		});
		const first = await Promise.race([p.exitPromise, t]);
		clearTimeout(timer);
		if (first === 'timeout') {
			p.child.ref();
			p.child.kill('SIGKILL');
			await p.exitPromise;
			return `${name} ignored ${signal} for ${timeoutMs} ms and was killed; ` +
				`log ${p.logFile}:\n${logTail(p.logFile)}`;
		}
		p.stopSignal = signal;
	}
	const { code, signal: sig, error } = p.exited;
	if (error)
		return `${name} could not run: ${error.message}`;
	if (code === 0 || (sig && sig === p.stopSignal))
		return null;
	return `${name} exited with ${sig ? `signal ${sig}` : `status ${code}`}; ` +
		`log ${p.logFile}:\n${logTail(p.logFile)}`;
}

// Resolves when GET /healthz answers 200, rejects when the process exits
// first or after HEALTH_TIMEOUT_MS.
async function waitHealthy(p, port, host) {
	const deadline = Date.now() + HEALTH_TIMEOUT_MS;
	for (;;) {
		if (p.exited)
			return false;
		try {
			const r = await request(`http://127.0.0.1:${port}`,
				{ path: '/healthz', host, timeoutMs: 2000 });
			if (r.status === 200)
				return true;
		} catch {
			// not listening yet
		}
		if (Date.now() > deadline)
			throw new Error(`relay on port ${port} not healthy after ${HEALTH_TIMEOUT_MS} ms; ` +
				`log ${p.logFile}:\n${logTail(p.logFile)}`);
		await sleep(50);
	}
}

// Resolves when /readyz answers 200 and, with feed, reports the capture
// feed up (readiness itself does not wait for it).
async function waitReady(port, host, logFile, feed) {
	const deadline = Date.now() + READY_TIMEOUT_MS;
	let last = '';
	for (;;) {
		try {
			const r = await request(`http://127.0.0.1:${port}`,
				{ path: '/readyz', host, timeoutMs: 2000 });
			if (r.status === 200 && (!feed || r.json().feed === 'up'))
				return;
			last = `${r.status} ${r.body}`;
		} catch (err) {
			last = err.message;
		}
		if (Date.now() > deadline)
			throw new Error(`relay on port ${port} not ready after ${READY_TIMEOUT_MS} ms ` +
				`(last answer: ${last}); log ${logFile}:\n${logTail(logFile)}`);
		await sleep(100);
	}
}

/**
 * Runs comb-admin with COMB_DATABASE_URL=dbUrl. Resolves to
 * {code, stdout, stderr}; never rejects on a non-zero status.
 */
export async function runAdmin(dbUrl, args) {
	const bin = path.join(buildDir, 'bin', 'comb-admin');
	try {
		const { stdout, stderr } = await execFileP(bin, args,
			{ env: serviceEnv({ COMB_DATABASE_URL: dbUrl }) });
		return { code: 0, stdout, stderr };
	} catch (err) {
		if (typeof err.code !== 'number')
			throw err;
		return { code: err.code, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
	}
}

/**
 * Starts a streaming standby of the fixture's PostgreSQL (scripts/standby.sh:
 * pg_basebackup -R, then a hot standby on a free port) in a directory beside
 * the fixture's (STACK-standby-<random>, which `scripts/test-stack.sh stop`
 * also stops). It holds every database the fixture held when it started
 * and replays whatever is written later. Resolves once it streams from the
 * primary (comb-capture stamps signals with WAL positions only while a
 * standby does) to:
 *   port, urlFor(db) (a COMB_DATABASE_URL of database db on the standby)
 *   query(db, sql) -> rows, on the standby
 *   pause(), resume()  pg_wal_replay_pause() / pg_wal_replay_resume()
 *   replayed() -> pg_last_wal_replay_lsn() text
 *   kill()     SIGKILL of its postmaster, as a crash
 *   promote()  pg_ctl promote (waits until it accepts writes)
 *   remove()   stops it and deletes its data
 */
export async function startStandby() {
	const stackEnv = readStackEnv();
	const dir = `${stackDir}-standby-${crypto.randomBytes(4).toString('hex')}`;
	const script = path.join(sourceDir, 'scripts', 'standby.sh');
	const run = async (...args) => {
		try {
			return (await execFileP('bash', [script, ...args], { maxBuffer: 1 << 20 })).stdout.trim();
		} catch (err) {
			throw new Error(`standby.sh ${args.join(' ')} failed: ${err.stderr || err.message}`);
		}
	};
	const forget = onExit(() => {
		try {
			execFileSync('bash', [script, 'remove', dir], { stdio: 'ignore' });
		} catch {
			// the fixture's stop reaps it
		}
	});
	const port = (await run('start', dir, stackEnv.PGPORT)).split('\n').pop();
	const query = (db, sql) => queryOn(db, sql, port);
	for (let deadline = Date.now() + 20000; ;) {
		const rows = await query('postgres', 'SELECT status FROM pg_stat_wal_receiver').catch(() => []);
		if (rows[0]?.[0] === 'streaming')
			break;
		if (Date.now() > deadline)
			throw new Error(`the standby on port ${port} does not stream from the primary`);
		await sleep(50);
	}
	return {
		port,
		urlFor: (db) => `postgresql://postgres@127.0.0.1:${port}/${db}`,
		query,
		pause: () => query('postgres', 'SELECT pg_wal_replay_pause()'),
		resume: () => query('postgres', 'SELECT pg_wal_replay_resume()'),
		replayed: async () => (await query('postgres', 'SELECT pg_last_wal_replay_lsn()'))[0][0],
		kill: () => run('kill', dir),
		promote: () => run('promote', dir),
		remove: async () => {
			await run('remove', dir);
			forget();
		},
	};
}

/**
 * Starts tests/tools/comb-signal-hold between comb-capture's endpoint
 * `upstream` and a new endpoint, for a node to take as its
 * COMB_CAPTURE_ENDPOINT, so that a test can hold the feed back and make
 * its signals arrive late. Resolves once it is bound, to:
 *   endpoint
 *   hold()     keeps every signal but the liveness heartbeat, in order
 *   release()  sends what was kept; resolves to how many
 *   queued(pred, timeoutMs?) -> the first signal kept matching pred
 *              ({type, community, d, lsn}), waiting for it
 *   stop()
 */
export async function startSignalHold(upstream) {
	const endpoint = `tcp://127.0.0.1:${await freePort()}`;
	const child = spawn(path.join(buildDir, 'bin', 'comb-signal-hold'), ['-u', upstream, '-b', endpoint],
		{ stdio: ['pipe', 'pipe', 'inherit'] });
	const p = supervise(child);
	const kept = [];
	const answers = [];
	const waiters = [];
	const wake = () => {
		for (const w of waiters.splice(0))
			w();
	};
	let buffered = '';
	child.stdout.on('data', (chunk) => {
		buffered += chunk;
		let nl;
		while ((nl = buffered.indexOf('\n')) >= 0) {
			const line = buffered.slice(0, nl);
			buffered = buffered.slice(nl + 1);
			if (line.startsWith('queued '))
				kept.push(JSON.parse(line.slice('queued '.length)));
			else
				answers.push(line);
		}
		wake();
	});
	const until = async (found, what, timeoutMs = 10000) => {
		const end = Date.now() + timeoutMs;
		for (;;) {
			const got = found();
			if (got !== undefined)
				return got;
			if (p.exited)
				throw new Error(`comb-signal-hold exited (${JSON.stringify(p.exited)})`);
			if (Date.now() > end)
				throw new Error(`comb-signal-hold: no ${what} within ${timeoutMs} ms`);
			await new Promise((r) => {
				waiters.push(r);
				setTimeout(r, 100);
			});
		}
	};
	const answer = (prefix) => until(() => {
		const i = answers.findIndex((a) => a.startsWith(prefix));
		return i < 0 ? undefined : answers.splice(i, 1)[0];
	}, `"${prefix}"`);
	await answer('ready');
	return {
		endpoint,
		hold: async () => {
			child.stdin.write('hold\n');
			await answer('held');
		},
		release: async () => {
			child.stdin.write('release\n');
			return Number((await answer('released ')).split(' ')[1]);
		},
		queued: (pred, timeoutMs) => until(() => kept.find(pred), 'such signal kept', timeoutMs),
		stop: async () => {
			if (p.exited)
				return;
			child.ref();
			child.stdin.end();
			await p.exitPromise;
		},
	};
}

/**
 * Starts a test stack: a fresh database cloned from the fixture's template,
 * communities, optionally comb-capture (when built), and N relay nodes.
 *
 * opts:
 *   nodes        number of relay nodes (default 1)
 *   env          extra environment for every relay (null value unsets)
 *   nodeEnv      array of per-node extra environment, applied after env;
 *                an entry may be a function of the stack (its capture
 *                endpoint known), called each time the node starts, that
 *                resolves to it
 *   communities  [{hosts: [...], owner?: pubkey hex, name?}]; default one
 *                community on host `localhost`; a missing owner is generated
 *                and its secret key lands in `admins`
 *   capture      start comb-capture (default: when build/bin/comb-capture exists)
 *   captureEnv   extra environment for capture
 *   ready        wait for /readyz 200 on every node (default: when capture runs)
 *   relayBin     the comb-relay binary (default BUILD/bin/comb-relay), for
 *                example a build with a planted bug
 *   standby      start a streaming standby (startStandby) once the database
 *                exists, and have every relay read from it
 *                (COMB_READ_DATABASE_URLS; a node's nodeEnv may unset it)
 *   ownCluster   run on a PostgreSQL of its own: a standby promoted once the
 *                database exists, so that no other test's open transaction
 *                holds back its read horizon (for tests that time live
 *                delivery); not with standby
 *
 * Resolves to the stack:
 *   url, urls[], port, ports[], wsUrl, wsUrls[]  (http://localhost:PORT...)
 *   dbName, dbUrl, redisUrl and redisDb (a Redis database of its own),
 *   relaySecretKey (hex), relayPubkey
 *   communities [{id, hosts, owner, ownerSk}], admins [Uint8Array sk]
 *   captureEndpoint, logs {relays[], captures[]}
 *   standby (with opts.standby: startStandby's, removed by stop())
 *   cluster (with opts.ownCluster: startStandby's, promoted; removed by stop())
 *   psql(sql) -> stdout, query(sql) -> rows, admin(args) -> {code, stdout, stderr}
 *   stopNode(i, signal?) -> {code, signal}, startNode(i), stopCapture(i, signal?),
 *   signalNode(i, signal) (for example SIGSTOP and SIGCONT),
 *   startCapture()
 *   stop()  stops everything, drops the database, rejects when a process
 *           crashed or did not stop cleanly
 */
export async function startRelay(opts = {}) {
	const stackEnv = readStackEnv();
	const relayBin = opts.relayBin ?? path.join(buildDir, 'bin', 'comb-relay');
	const captureBin = path.join(buildDir, 'bin', 'comb-capture');
	const nodes = opts.nodes ?? 1;
	const dbName = `t_${crypto.randomBytes(6).toString('hex')}`;
	const { db: redisDb, url: redisUrl } = await privateRedis(stackEnv);
	const logPrefix = path.join(stackDir, 'logs', `${testName()}-${dbName}`);

	if (!fs.existsSync(relayBin))
		throw new Error(`${relayBin} is missing (build the project first)`);

	if (opts.standby && opts.ownCluster)
		throw new Error('startRelay: standby and ownCluster do not go together');
	await psqlOn('postgres',
		`CREATE DATABASE "${dbName}" TEMPLATE ${stackEnv.COMB_TEST_TEMPLATE_DB ?? 'comb_template'}`);
	const standby = opts.standby ? await startStandby() : null;
	const cluster = opts.ownCluster ? await startStandby() : null;
	if (cluster) {
		try {
			await cluster.promote();
		} catch (err) {
			await cluster.remove();
			throw err;
		}
	}
	const dbUrl = cluster ? cluster.urlFor(dbName) : `${stackEnv.COMB_TEST_DATABASE_URL_BASE}/${dbName}`;

	const relayKey = newKey();
	const stack = {
		dbName, dbUrl, redisUrl, redisDb,
		relaySecretKey: relayKey.skHex,
		relayPubkey: relayKey.pk,
		communities: [],
		admins: [],
		urls: [], ports: [], wsUrls: [],
		logs: { relays: [], captures: [] },
		captureEndpoint: null,
		standby,
		cluster,
	};
	const relays = [];
	const captures = [];
	let stopped = false;

	try {
		const wanted = opts.communities ?? [{ hosts: ['localhost'] }];
		for (const c of wanted) {
			let owner = c.owner;
			let ownerSk = null;
			if (!owner) {
				const k = newKey();
				owner = k.pk;
				ownerSk = k.sk;
				stack.admins.push(k.sk);
			}
			const args = ['community', 'create'];
			for (const h of c.hosts)
				args.push('--host', h);
			args.push('--owner', owner);
			if (c.name)
				args.push('--name', c.name);
			const r = await runAdmin(dbUrl, args);
			if (r.code !== 0)
				throw new Error(`comb-admin ${args.join(' ')} failed (${r.code}): ${r.stderr}`);
			const lines = r.stdout.trim().split('\n');
			stack.communities.push({ id: lines[lines.length - 1].trim(), hosts: c.hosts, owner, ownerSk });
		}
		const healthHost = wanted.length > 0 && wanted[0].hosts.length > 0 ?
			wanted[0].hosts[0] : '127.0.0.1';

		const wantCapture = opts.capture ?? fs.existsSync(captureBin);
		if (wantCapture)
			stack.captureEndpoint = `tcp://127.0.0.1:${await freePort()}`;
		const common = {
			COMB_DATABASE_URL: dbUrl,
			COMB_REDIS_URL: redisUrl,
			COMB_RELAY_SECRET_KEY: relayKey.skHex,
			COMB_LOG_LEVEL: process.env.COMB_E2E_LOG_LEVEL ?? 'info',
		};

		stack.startCapture = async (extraEnv = {}) => {
			const i = captures.length;
			const logFile = `${logPrefix}-capture${i}.log`;
			const p = spawnService(captureBin, [], serviceEnv({
				...common,
				COMB_CAPTURE_ENDPOINT: stack.captureEndpoint,
				...(opts.captureEnv ?? {}),
				...extraEnv,
			}), logFile);
			captures.push(p);
			stack.logs.captures.push(logFile);
			await sleep(100);
			if (p.exited)
				throw new Error(`comb-capture exited at once; log ${logFile}:\n${logTail(logFile)}`);
			return i;
		};
		stack.stopCapture = async (i, signal = 'SIGTERM') => {
			const complaint = await stopService(captures[i], `capture ${i}`, signal);
			if (complaint)
				throw new Error(complaint);
		};

		const nodeEnv = async (i) => serviceEnv({
			...common,
			COMB_LISTEN: `127.0.0.1:${stack.ports[i]}`,
			COMB_POLICY_PLUGIN: path.join(buildDir, 'lib', 'policy_default.so'),
			COMB_INCREMENTAL_ENABLED: 'true',
			// Every test client comes from 127.0.0.1; the tests of the
			// per-address caps set their own.
			COMB_MAX_CONNECTIONS_PER_IP: '100000',
			...(standby ? { COMB_READ_DATABASE_URLS: standby.urlFor(dbName) } : {}),
			COMB_MAX_HTTP_CONNECTIONS_PER_IP: '100000',
			...(stack.captureEndpoint ? { COMB_CAPTURE_ENDPOINT: stack.captureEndpoint } : {}),
			...(opts.env ?? {}),
			...await (typeof opts.nodeEnv?.[i] === 'function' ?
				opts.nodeEnv[i](stack) : opts.nodeEnv?.[i] ?? {}),
		});

		// Starts node i on its port (a new free port when it has none yet; a
		// port lost to a race is replaced, at most three times).
		const launch = async (i, keepPort) => {
			const logFile = `${logPrefix}-relay${i}.log`;
			stack.logs.relays[i] = logFile;
			for (let attempt = 0; ; attempt++) {
				if (!keepPort || stack.ports[i] === undefined)
					stack.ports[i] = await freePort();
				const env = await nodeEnv(i);
				const p = spawnService(relayBin, [], env, logFile);
				p.stopTimeoutMs = relayStopTimeoutMs(env);
				relays[i] = p;
				if (await waitHealthy(p, stack.ports[i], healthHost))
					break;
				if (attempt >= 2 || keepPort)
					throw new Error(`comb-relay ${i} exited before it was healthy ` +
						`(${JSON.stringify(p.exited)}); log ${logFile}:\n${logTail(logFile)}`);
			}
			stack.urls[i] = `http://localhost:${stack.ports[i]}`;
			stack.wsUrls[i] = `ws://localhost:${stack.ports[i]}`;
			if (opts.ready ?? wantCapture)
				await waitReady(stack.ports[i], healthHost, logFile, wantCapture);
		};
		stack.startNode = (i) => launch(i, true);
		stack.signalNode = (i, signal) => relays[i].child.kill(signal);
		stack.stopNode = async (i, signal = 'SIGTERM') => {
			const complaint = await stopService(relays[i], `relay ${i}`, signal);
			if (complaint)
				throw new Error(complaint);
			return relays[i].exited;
		};

		if (wantCapture)
			await stack.startCapture();
		for (let i = 0; i < nodes; i++)
			await launch(i, false);
	} catch (err) {
		for (const p of [...relays, ...captures]) {
			if (!p.exited) {
				// unref'd by supervise(): hold the event loop until it exits
				p.child.ref();
				p.child.kill('SIGKILL');
			}
		}
		await Promise.all([...relays, ...captures].map((p) => p.exitPromise));
		await standby?.remove();
		await cluster?.remove();
		throw err;
	}

	stack.url = stack.urls[0];
	stack.port = stack.ports[0];
	stack.wsUrl = stack.wsUrls[0];
	stack.psql = (sql) => psqlOn(dbName, sql, cluster?.port);
	stack.query = (sql) => queryOn(dbName, sql, cluster?.port);
	stack.admin = (args) => runAdmin(dbUrl, args);
	stack.stop = async () => {
		if (stopped)
			return;
		stopped = true;
		const complaints = [];
		for (let i = 0; i < relays.length; i++) {
			const c = await stopService(relays[i], `relay ${i}`);
			if (c)
				complaints.push(c);
		}
		for (let i = 0; i < captures.length; i++) {
			const c = await stopService(captures[i], `capture ${i}`);
			if (c)
				complaints.push(c);
		}
		await standby?.remove();
		await cluster?.remove();
		if (complaints.length > 0)
			throw new Error(`the stack did not stop cleanly (database ${dbName} kept):\n` +
				complaints.join('\n'));
		await psqlOn('postgres', `DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
	};
	return stack;
}
