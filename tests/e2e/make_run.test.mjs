// `make run` (scripts/run.sh) from the built tree: it brings up NIP-11 on
// COMB_LISTEN, accepts a signed kind-9 message from the dev owner into a new
// channel, stops every process it started on SIGINT, and a second run,
// through make, keeps the data and stops every process it started when
// SIGTERM is sent to its whole process group three times (make passes each
// on to run.sh, which must not die half way through stopping). A third
// stack started beside the second with only another COMB_LISTEN keeps its
// state in var/<port> and its servers on ports of its own. A run whose
// dev owner key was lost, while its database was not, makes the new key an
// admin of the dev community it finds. With COMB_STANDBYS=1 the relay
// reads from a streaming standby that stops with the rest. State goes to a
// temporary COMB_VAR_DIR so ./var is untouched; that folder keeps mode 0700,
// so when the test runs as root the postgres user cannot reach it and
// run.sh must keep the data elsewhere rather than change any folder's mode.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';

import { buildDir, freePort, get, post, scrapeMetrics, signEvent, sourceDir } from './lib/harness.mjs';

const varDir = fs.mkdtempSync(path.join(os.tmpdir(), 'comb-run-'));

// State folders of the stacks started here.
const stateDirs = [varDir];

// Where PostgreSQL keeps the data of the stack in dir: dir/pg, or the folder
// it links to.
function pgData(dir) {
	try {
		return fs.realpathSync(path.join(dir, 'pg'));
	} catch {
		return null;
	}
}

after(() => {
	for (const dir of stateDirs) {
		const data = pgData(dir);
		if (data && data !== path.join(dir, 'pg'))
			fs.rmSync(data, { recursive: true, force: true });
	}
	fs.rmSync(varDir, { recursive: true, force: true });
});

// Starts scripts/run.sh (through `make run` when viaMake) in its own process
// group; resolves when the relay answers NIP-11.
async function startRun(port, viaMake = false, extraEnv = {}) {
	const argv = viaMake ?
		['make', ['--no-print-directory', '-C', sourceDir, 'run']] :
		['bash', [path.join(sourceDir, 'scripts/run.sh')]];
	const p = spawn(argv[0], argv[1], {
		env: {
			...process.env,
			COMB_SKIP_DEPS: '1',
			COMB_SKIP_BUILD: '1',
			BUILD_DIR: buildDir,
			COMB_VAR_DIR: varDir,
			COMB_LISTEN: `127.0.0.1:${port}`,
			COMB_DATABASE_URL: '',
			COMB_REDIS_URL: '',
			COMB_CAPTURE_ENDPOINT: '',
			...extraEnv,
		},
		detached: true,
		stdio: ['ignore', 'pipe', 'pipe'],
	});
	let out = '';
	p.stdout.on('data', (c) => { out += c; });
	p.stderr.on('data', (c) => { out += c; });
	p.exitCode = null;
	const exited = new Promise((resolve) => p.on('exit', (code, signal) => resolve({ code, signal })));
	for (let i = 0; i < 600; i++) {
		try {
			const r = await get(`http://127.0.0.1:${port}`, '/',
				{ host: 'localhost', headers: { accept: 'application/nostr+json' }, timeoutMs: 1000 });
			if (r.status === 200)
				return { p, exited, output: () => out };
		} catch {
			// not listening yet
		}
		await new Promise((r) => setTimeout(r, 100));
	}
	process.kill(-p.pid, 'SIGKILL');
	throw new Error(`make run did not come up:\n${out}`);
}

// What still runs of the stack in dir: processes naming its state folder or
// PostgreSQL's data folder, and anything listening on the ports it chose
// (PostgreSQL, Redis, capture).
function leftovers(dir = varDir) {
	let found = '';
	for (const name of new Set([dir, pgData(dir)].filter(Boolean))) {
		try {
			found += execFileSync('pgrep', ['-af', name], { encoding: 'utf8' });
		} catch {
			// none
		}
	}
	for (const name of ['pg', 'redis', 'capture']) {
		const file = path.join(dir, `${name}.port`);
		if (!fs.existsSync(file))
			continue;
		const port = fs.readFileSync(file, 'utf8').trim();
		const listening = execFileSync('bash', ['-c', `ss -Hltn "sport = :${port}"`], { encoding: 'utf8' }).trim();
		if (listening)
			found += `\n${name} still listening on ${port}`;
	}
	return found.trim();
}

// Sends signal to the run's process group `times` times, 100 ms apart,
// and waits for it to exit and for the servers of its state folder dir to
// be gone.
async function stopRun(run, signal = 'SIGINT', times = 1, dir = varDir) {
	let gone = false;
	run.exited.then(() => { gone = true; });
	for (let i = 0; i < times && !gone; i++) {
		try {
			process.kill(-run.p.pid, signal);
		} catch {
			// the group has just exited
		}
		await new Promise((res) => setTimeout(res, 100));
	}
	const r = await run.exited;
	for (let i = 0; i < 100 && leftovers(dir); i++)
		await new Promise((res) => setTimeout(res, 100));
	return r;
}

test('make run: NIP-11, a kind-9 from the dev owner, clean stop, data kept', async () => {
	const port = await freePort();
	const base = `http://localhost:${port}`;
	let run = await startRun(port);
	let channel;
	let message;
	try {
		const info = await get(base, '/', { headers: { accept: 'application/nostr+json' } });
		const doc = JSON.parse(info.body);
		assert.equal(doc.software, 'comb');
		assert.ok(doc.artifacts.modes.includes('incremental'), 'make run turns incremental reads on');
		for (const name of ['env', 'dev-owner.key'])
			assert.ok(fs.existsSync(path.join(varDir, name)), name);
		const env = fs.readFileSync(path.join(varDir, 'env'), 'utf8');
		for (const key of ['COMB_DATABASE_URL', 'COMB_REDIS_URL', 'COMB_LISTEN', 'COMB_RELAY_SECRET_KEY'])
			assert.match(env, new RegExp(`^${key}=`, 'm'));
		const sk = Buffer.from(fs.readFileSync(path.join(varDir, 'dev-owner.key'), 'utf8').trim(), 'hex');
		channel = crypto.randomUUID();
		const create = signEvent(sk, { kind: 9007, tags: [['h', channel], ['name', 'general']] });
		let r = await post(base, '/events', create, sk);
		assert.equal(r.status, 200, r.body);
		message = signEvent(sk, { kind: 9, tags: [['h', channel]], content: 'hello from make run' });
		r = await post(base, '/events', message, sk);
		assert.deepEqual(JSON.parse(r.body), { id: message.id, accepted: true, message: '' });
		r = await post(base, '/query', [{ kinds: [9], '#h': [channel] }], sk);
		assert.deepEqual(JSON.parse(r.body).map((e) => e.id), [message.id]);
	} finally {
		const stopped = await stopRun(run);
		assert.equal(leftovers(), '', `processes left behind:\n${run.output()}`);
		assert.notEqual(stopped.code, null, 'run.sh exited');
	}

	// A second run, through make, reuses var/ and its data.
	run = await startRun(port, true);
	try {
		const sk = Buffer.from(fs.readFileSync(path.join(varDir, 'dev-owner.key'), 'utf8').trim(), 'hex');
		const r = await post(base, '/query', [{ kinds: [9], '#h': [channel] }], sk);
		assert.deepEqual(JSON.parse(r.body).map((e) => e.id), [message.id]);

		// A second stack beside it, told only another COMB_LISTEN: it keeps
		// its state in var/<port> and its servers on ports of their own.
		const port2 = await freePort();
		const dir2 = path.join(varDir, String(port2));
		stateDirs.push(dir2);
		const run2 = await startRun(port2);
		try {
			const doc = JSON.parse((await get(`http://localhost:${port2}`, '/',
				{ headers: { accept: 'application/nostr+json' } })).body);
			assert.equal(doc.software, 'comb');
			const endpoint = (dir) => /^COMB_CAPTURE_ENDPOINT=(.*)$/m.exec(
				fs.readFileSync(path.join(dir, 'env'), 'utf8'))[1];
			assert.notEqual(endpoint(dir2), endpoint(varDir), 'each stack has its own capture');
		} finally {
			await stopRun(run2, 'SIGTERM', 1, dir2);
			assert.equal(leftovers(dir2), '', `second stack left behind:\n${run2.output()}`);
		}
		assert.equal((await get(base, '/healthz')).status, 200, 'the first stack still runs');
	} finally {
		const stopped = await stopRun(run, 'SIGTERM', 3);
		assert.equal(leftovers(), '', `processes left behind after SIGTERM to the group:\n${run.output()}`);
		assert.ok(stopped.code !== null || stopped.signal === 'SIGTERM', JSON.stringify(stopped));
		assert.match(run.output(), /run: stopping PostgreSQL\n(.*\n)*run: stopped\n/);
	}

	// The dev owner's key and the record of its community are lost, the
	// database is not: the community keeps its hosts, and the new owner
	// key is made its admin, so make run (the board's channel) still works.
	for (const name of ['dev-owner.key', 'dev-owner.pub', 'dev-community'])
		fs.rmSync(path.join(varDir, name), { force: true });
	run = await startRun(port);
	try {
		assert.match(run.output(), /keeping the community that holds .*; adding [0-9a-f]{64} as its admin/);
		const sk = Buffer.from(fs.readFileSync(path.join(varDir, 'dev-owner.key'), 'utf8').trim(), 'hex');
		const create = signEvent(sk, { kind: 9007, tags: [['h', crypto.randomUUID()], ['name', 'after']] });
		const r = await post(base, '/events', create, sk);
		assert.deepEqual(JSON.parse(r.body), { id: create.id, accepted: true, message: '' });
	} finally {
		await stopRun(run);
		assert.equal(leftovers(), '', `processes left behind:\n${run.output()}`);
	}

	// run.sh changed no folder's mode.
	assert.equal(fs.statSync(varDir).mode & 0o7777, 0o700, 'the state folder keeps its mode');
});

test('make run with COMB_STANDBYS=1: reads served by a streaming standby that stops with the rest', async () => {
	// inside the test's state folder, removed with it
	const dir = path.join(varDir, 'with-standby');
	fs.mkdirSync(dir, { recursive: true });
	stateDirs.push(dir);
	const port = await freePort();
	const base = `http://localhost:${port}`;
	const run = await startRun(port, false, { COMB_VAR_DIR: dir, COMB_STANDBYS: '1' });
	let standbyPort;
	try {
		const env = fs.readFileSync(path.join(dir, 'env'), 'utf8');
		const urls = /^COMB_READ_DATABASE_URLS=(.*)$/m.exec(env)?.[1] ?? '';
		standbyPort = /^postgresql:\/\/postgres@127\.0\.0\.1:(\d+)\/comb$/.exec(urls)?.[1];
		assert.ok(standbyPort, `var/env names the standby: ${urls}`);
		const sk = Buffer.from(fs.readFileSync(path.join(dir, 'dev-owner.key'), 'utf8').trim(), 'hex');
		const channel = crypto.randomUUID();
		const create = signEvent(sk, { kind: 9007, tags: [['h', channel], ['name', 'standby']] });
		assert.equal((await post(base, '/events', create, sk)).status, 200);
		const message = signEvent(sk, { kind: 9, tags: [['h', channel]], content: 'read me back' });
		assert.equal((await post(base, '/events', message, sk)).status, 200);
		let served = 0;
		for (let i = 0; i < 50 && served === 0; i++) {
			const r = await post(base, '/query', [{ kinds: [9], '#h': [channel] }], sk,
				{ nip98: { extraTags: [['nonce', crypto.randomUUID()]] } });
			assert.deepEqual(JSON.parse(r.body).map((e) => e.id), [message.id], 'the writer reads its write');
			served = (await scrapeMetrics(base)).sum('comb_read_standby_reads_total');
			if (served === 0)
				await new Promise((r) => setTimeout(r, 100));
		}
		assert.ok(served > 0, 'a read was served by the standby');
	} finally {
		await stopRun(run, 'SIGINT', 1, dir);
		assert.equal(leftovers(dir), '', `processes left behind:\n${run.output()}`);
		assert.match(run.output(), /run: stopping the standby in/);
		if (standbyPort) {
			const listening = execFileSync('bash', ['-c', `ss -Hltn "sport = :${standbyPort}"`],
				{ encoding: 'utf8' }).trim();
			assert.equal(listening, '', 'the standby stopped');
		}
		// its data, wherever the postgres user could keep it
		execFileSync('bash', [path.join(sourceDir, 'scripts', 'standby.sh'), 'remove',
			path.join(dir, 'standby1')]);
	}
});
