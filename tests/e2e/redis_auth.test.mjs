// Redis with authentication (issue 18 item 6): a private redis-server
// started with --requirepass and an ACL user. A relay that authenticates
// as the ACL user through its URL (user:password@, percent-encoded) and a
// capture that reads the default user's password from
// COMB_REDIS_PASSWORD_FILE both work: the relay is ready (its readiness
// pings Redis) and capture subscribes for ephemeral events, which reach
// the feed through Redis and capture. A wrong password
// leaves the relay unready with "redis unavailable", and a password given
// both in the URL and in a file is refused at start.

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';

import { buildDir, freePort, get, startRelay } from './lib/harness.mjs';
import { assertAccepted, createChannel, publish } from './lib/artifacts.mjs';

const execFileP = promisify(execFile);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const PASSWORD = 'top secret';
const ACL_USER = 'comb';
const ACL_PASSWORD = 'p@ss:w/rd';

// Resolves to Redis's first reply line to `AUTH <password>` then PING.
function authPing(port, password) {
	return new Promise((resolve, reject) => {
		const s = net.connect(port, '127.0.0.1');
		let data = '';
		s.setTimeout(1000, () => s.destroy(new Error('timeout')));
		s.on('error', reject);
		s.on('data', (d) => {
			data += d;
			if (data.split('\r\n').length > 2) {
				s.end();
				resolve(data);
			}
		});
		const arg = (x) => `$${Buffer.byteLength(x)}\r\n${x}\r\n`;
		s.write(`*2\r\n${arg('AUTH')}${arg(password)}*1\r\n${arg('PING')}`);
	});
}

describe('redis with requirepass and an ACL user', () => {
	let redis;
	let port;
	let dir;

	before(async () => {
		dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comb-redis-auth-'));
		port = await freePort();
		redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1',
			'--save', '', '--appendonly', 'no', '--dir', dir,
			'--requirepass', PASSWORD,
			'--user', ACL_USER, 'on', `>${ACL_PASSWORD}`, '~*', '&*', '+@all'], { stdio: 'ignore' });
		for (let i = 0; ; i++) {
			try {
				if ((await authPing(port, PASSWORD)).includes('+PONG'))
					break;
			} catch {
				// not listening yet
			}
			if (i > 100)
				throw new Error('redis-server did not start');
			await sleep(50);
		}
	});
	after(() => {
		redis?.kill('SIGKILL');
		fs.rmSync(dir, { recursive: true, force: true });
	});

	test('the server refuses clients without the password', async () => {
		assert.match(await authPing(port, 'wrong'), /WRONGPASS/);
	});

	test('relay (ACL user in the URL) and capture (password file) authenticate', async () => {
		const pwFile = path.join(dir, 'password');
		fs.writeFileSync(pwFile, `${PASSWORD}\n`, { mode: 0o600 });
		const enc = encodeURIComponent;
		const stack = await startRelay({
			env: { COMB_REDIS_URL: `redis://${ACL_USER}:${enc(ACL_PASSWORD)}@127.0.0.1:${port}/0` },
			captureEnv: { COMB_REDIS_URL: `redis://127.0.0.1:${port}`, COMB_REDIS_PASSWORD_FILE: pwFile },
		});
		try {
			const ready = await get(stack.url, '/readyz', { host: 'localhost' });
			assert.equal(ready.status, 200, ready.body);
			assert.match(fs.readFileSync(stack.logs.captures[0], 'utf8'),
				/ephemeral: subscribed to redis 127\.0\.0\.1/);

			// An ephemeral event goes relay -> Redis -> capture -> feed.
			const admin = stack.admins[0];
			const cid = stack.communities[0].id;
			const ch = await createChannel(stack, admin, { name: 'typing' });
			const tap = spawn(path.join(buildDir, 'bin', 'comb-signal-tap'),
				['-e', stack.captureEndpoint, '-t', `${cid}:`], { stdio: ['ignore', 'pipe', 'inherit'] });
			try {
				const lines = readline.createInterface({ input: tap.stdout });
				/** The first signal the tap prints that is like(), within 8 s. */
				const first = (like, what) => new Promise((resolve, reject) => {
					const timer = setTimeout(() => reject(new Error(`no ${what} within 8 s`)), 8000);
					lines.on('line', (line) => {
						const sig = JSON.parse(line);
						if (like(sig)) {
							clearTimeout(timer);
							resolve(sig);
						}
					});
				});
				// the tap's subscription is in effect once capture answered
				// it with the community's mark
				await first((sig) => sig.type === 'heartbeat' && sig.community === Number(cid), 'mark');
				const seen = first((sig) => sig.type === 'ephemeral' && sig.channel === ch, 'ephemeral signal');
				const res = await publish(stack, admin, { kind: 20001, tags: [['h', ch]], content: 'typing...' });
				assertAccepted(res, 'ephemeral event');
				assert.equal(JSON.parse((await seen).payload).id, res.event.id);
			} finally {
				tap.kill('SIGKILL');
			}
		} finally {
			await stack.stop();
		}
	});

	test('a wrong password leaves the relay unready', async () => {
		const stack = await startRelay({
			capture: false,
			ready: false,
			env: { COMB_REDIS_URL: `redis://:wrong@127.0.0.1:${port}` },
		});
		try {
			const ready = await get(stack.url, '/readyz', { host: 'localhost' });
			assert.equal(ready.status, 503);
			assert.match(ready.body, /redis unavailable/);
			assert.match(fs.readFileSync(stack.logs.relays[0], 'utf8'), /auth refused: WRONGPASS/);
		} finally {
			await stack.stop();
		}
	});

	test('a password in the URL and in a file is refused at start', async () => {
		const pwFile = path.join(dir, 'password2');
		fs.writeFileSync(pwFile, 'x\n');
		const bin = path.join(buildDir, 'bin', 'comb-capture');
		const err = await execFileP(bin, [], {
			env: {
				PATH: process.env.PATH,
				COMB_DATABASE_URL: 'postgresql://127.0.0.1:1/none',
				COMB_REDIS_URL: `redis://:a@127.0.0.1:${port}`,
				COMB_REDIS_PASSWORD_FILE: pwFile,
			},
		}).then(() => null, (e) => e);
		assert.ok(err, 'comb-capture started');
		assert.equal(err.code, 1);
		assert.match(err.stderr, /give it in one place/);
	});
});
