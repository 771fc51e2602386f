// comb-admin against the fixture's real PostgreSQL: --help on every
// subcommand (exit 0, usage on stdout), usage errors (exit 2) and failures
// (exit 1) kept apart, version, migrate --status before and after a
// migration and on a ledger that disagrees with the files, a migration
// run outside a transaction step by step (failed, then run again), and the
// community commands: create, list, show, add-host, remove-host,
// add-admin, remove-admin (a community keeps one host and one admin) and
// reset-cursors, with a relay answering on a host added after it started.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { get, newKey, psqlOn, readStackEnv, runAdmin, sourceDir, startRelay } from './lib/harness.mjs';

const forms = [
	[], ['migrate'], ['community'], ['community', 'list'], ['community', 'show'],
	['community', 'create'], ['community', 'add-host'], ['community', 'remove-host'],
	['community', 'add-admin'], ['community', 'remove-admin'],
	['community', 'reset-cursors'], ['key'], ['key', 'generate'], ['config-table'],
	['version'],
];

describe('comb-admin without a database', () => {
	test('--help on every subcommand prints its usage and exits 0', async () => {
		for (const form of forms) {
			const r = await runAdmin('', [...form, '--help']);
			assert.equal(r.code, 0, `${form.join(' ')} --help: ${r.stderr}`);
			assert.match(r.stdout, /^usage: comb-admin /, form.join(' '));
			assert.ok(r.stdout.includes(`comb-admin ${form.join(' ')}`), form.join(' '));
		}
	});

	test('usage errors exit 2 and say what is wrong', async () => {
		const cases = [
			[[], /a subcommand is required/],
			[['frobnicate'], /unknown subcommand 'frobnicate'/],
			[['community'], /a community subcommand is required/],
			[['community', 'create', '--host', 'a.example'], /--host and one --owner/],
			[['community', 'create', '--host', 'bad host', '--owner', 'a'.repeat(64)], /bad host/],
			[['community', 'add-host', '--id', '1'], /give the host to add/],
			[['community', 'add-admin', '--id', '1', 'XYZ'], /64 lowercase hex/],
			[['community', 'show', '--id', 'x'], /bad community id/],
			[['community', 'show', '--id', '1', '--host', 'a'], /give the community/],
			[['migrate', '--frob'], /unexpected '--frob'/],
			[['key', 'rotate'], /unknown key subcommand 'rotate'/],
			[['version', 'x'], /takes no arguments/],
		];
		for (const [args, re] of cases) {
			const r = await runAdmin('', args);
			assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
			assert.match(r.stderr, re, args.join(' '));
			assert.match(r.stderr, /usage: comb-admin/, args.join(' '));
		}
	});

	test('version prints the project version', async () => {
		const r = await runAdmin('', ['version']);
		const cmake = fs.readFileSync(path.join(sourceDir, 'CMakeLists.txt'), 'utf8');
		const v = /project\(comb VERSION ([0-9.]+)/.exec(cmake)[1];
		assert.equal(r.code, 0);
		assert.equal(r.stdout, `comb-admin ${v}\n`);
	});

	test('a command that needs the database fails with 1 when none is set', async () => {
		const r = await runAdmin('', ['community', 'list']);
		assert.equal(r.code, 1);
		assert.match(r.stderr, /COMB_DATABASE_URL is not set/);
	});
});

describe('comb-admin migrate --status', () => {
	const db = `t_admin_${crypto.randomBytes(5).toString('hex')}`;
	let url;

	before(async () => {
		url = `${readStackEnv().COMB_TEST_DATABASE_URL_BASE}/${db}`;
		await psqlOn('postgres', `CREATE DATABASE "${db}"`);
	});
	after(() => psqlOn('postgres', `DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`));

	test('lists pending, then applied migrations, and refuses a ledger that disagrees', async () => {
		const files = fs.readdirSync(path.join(sourceDir, 'migrations'))
			.filter((f) => f.endsWith('.sql')).sort().map((f) => f.slice(0, -4));
		let r = await runAdmin(url, ['migrate', '--status']);
		assert.equal(r.code, 0, r.stderr);
		assert.equal(r.stdout, files.map((f) => `${f}\tpending\n`).join('') +
			`migrations: 0 applied, ${files.length} pending\n`);
		// --status changed nothing
		assert.equal((await psqlOn(db, "SELECT to_regclass('comb_migrations') IS NULL")).trim(), 't');

		r = await runAdmin(url, ['migrate']);
		assert.equal(r.code, 0, r.stderr);
		r = await runAdmin(url, ['migrate', '--status']);
		assert.equal(r.code, 0, r.stderr);
		const lines = r.stdout.trim().split('\n');
		assert.equal(lines.length, files.length + 1);
		files.forEach((f, i) => assert.match(lines[i], new RegExp(`^${f}\tapplied\t\\d{4}-`)));
		assert.equal(lines.at(-1), `migrations: ${files.length} applied, 0 pending`);

		await psqlOn(db, "UPDATE comb_migrations SET sha256 = 'x' WHERE version = 1");
		r = await runAdmin(url, ['migrate', '--status']);
		assert.equal(r.code, 1);
		assert.match(r.stderr, /migrations are forward-only/);
	});
});

describe('comb-admin migrate outside a transaction', () => {
	const db = `t_admin_${crypto.randomBytes(5).toString('hex')}`;
	let url, dir;

	before(async () => {
		url = `${readStackEnv().COMB_TEST_DATABASE_URL_BASE}/${db}`;
		await psqlOn('postgres', `CREATE DATABASE "${db}"`);
		dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comb-migrations-'));
		fs.writeFileSync(path.join(dir, '0001_table.sql'), 'CREATE TABLE t (x integer);\n');
		// Its third step fails until t holds two rows; CREATE INDEX
		// CONCURRENTLY only runs outside a transaction.
		fs.writeFileSync(path.join(dir, '0002_steps.sql'), [
			'-- comb:no-transaction',
			'INSERT INTO t VALUES (1);',
			'-- comb:step',
			'CREATE INDEX CONCURRENTLY IF NOT EXISTS t_x ON t (x);',
			'-- comb:step',
			"DO $$ BEGIN IF (SELECT count(*) FROM t) < 2 THEN RAISE EXCEPTION 'not yet'; END IF; END $$;",
			'',
		].join('\n'));
	});
	after(async () => {
		fs.rmSync(dir, { recursive: true, force: true });
		await psqlOn('postgres', `DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`);
	});

	test('sends the steps one at a time, keeps those before a failure and records the migration after its last', async () => {
		let r = await runAdmin(url, ['migrate', '--dir', dir]);
		assert.equal(r.code, 1);
		assert.match(r.stderr, /not yet/);
		assert.match(r.stderr, /step 3 of 0002_steps failed; the steps before it stay applied/);
		assert.equal((await psqlOn(db, 'SELECT string_agg(version::text, \',\' ORDER BY version) FROM comb_migrations')).trim(), '1');
		assert.equal((await psqlOn(db, 'SELECT count(*) FROM t')).trim(), '1');
		assert.equal((await psqlOn(db, "SELECT indisvalid FROM pg_index WHERE indexrelid = 't_x'::regclass")).trim(), 't');

		// Run again: from its first step, which now makes the third pass.
		r = await runAdmin(url, ['migrate', '--dir', dir]);
		assert.equal(r.code, 0, r.stderr);
		assert.match(r.stdout, /applied 0002_steps\nmigrations: 1 applied, 1 already in place/);
		assert.equal((await psqlOn(db, 'SELECT string_agg(version::text, \',\' ORDER BY version) FROM comb_migrations')).trim(), '1,2');
		assert.equal((await psqlOn(db, 'SELECT count(*) FROM t')).trim(), '2');
		r = await runAdmin(url, ['migrate', '--dir', dir]);
		assert.equal(r.code, 0, r.stderr);
		assert.match(r.stdout, /migrations: 0 applied, 2 already in place/);
		assert.equal((await psqlOn(db, 'SELECT count(*) FROM t')).trim(), '2');
	});
});

describe('comb-admin community', () => {
	let stack;
	const owner = newKey();
	const second = newKey();

	before(async () => {
		stack = await startRelay({
			capture: false,
			communities: [{ hosts: ['a.example'], owner: owner.pk, name: 'team a' }],
		});
	});
	after(() => stack?.stop());

	const admin = (args) => stack.admin(['community', ...args]);

	test('list and show name the community, its hosts and admins', async () => {
		const id = stack.communities[0].id;
		let r = await admin(['list']);
		assert.equal(r.code, 0, r.stderr);
		assert.equal(r.stdout, `${id}\tteam a\ta.example\n`);
		r = await admin(['show', '--host', 'A.example']);
		assert.equal(r.code, 0, r.stderr);
		assert.match(r.stdout, new RegExp(`^id: ${id}\nname: team a\ncursor epoch: 1\ncreated: .+\n` +
			`host: a.example\nadmin: ${owner.pk}\n$`));
		r = await admin(['show', '--id', '999999']);
		assert.equal(r.code, 1);
		assert.match(r.stderr, /no community has id 999999/);
	});

	test('a host added later is served at once; the last host stays', async () => {
		const id = stack.communities[0].id;
		let res = await get(stack.url, '/', { host: 'b.example', headers: { accept: 'application/nostr+json' } });
		assert.equal(res.status, 404);
		let r = await admin(['add-host', '--id', id, 'B.Example']);
		assert.equal(r.code, 0, r.stderr);
		assert.equal(r.stdout, `community ${id}: add-host b.example\n`);
		res = await get(stack.url, '/', { host: 'b.example', headers: { accept: 'application/nostr+json' } });
		assert.equal(res.status, 200);

		r = await admin(['add-host', '--host', 'a.example', 'b.example']);
		assert.equal(r.code, 1);
		assert.match(r.stderr, new RegExp(`host b.example is already bound to community ${id}`));
		r = await stack.admin(['community', 'create', '--host', 'b.example', '--owner', owner.pk]);
		assert.equal(r.code, 1);
		assert.match(r.stderr, /already bound/);

		r = await admin(['remove-host', '--host', 'b.example', 'a.example']);
		assert.equal(r.code, 0, r.stderr);
		r = await admin(['remove-host', '--id', id, 'b.example']);
		assert.equal(r.code, 1);
		assert.match(r.stderr, /keeps at least one host/);
		r = await admin(['remove-host', '--id', id, 'c.example']);
		assert.equal(r.code, 1);
		assert.match(r.stderr, /is not bound to c.example/);
		const hosts = await stack.query(`SELECT host FROM community_hosts WHERE community_id = ${id}`);
		assert.deepEqual(hosts, [['b.example']]);
		res = await get(stack.url, '/', { host: 'a.example', headers: { accept: 'application/nostr+json' } });
		assert.equal(res.status, 404);
	});

	test('admins are added and removed; the last admin stays', async () => {
		const id = stack.communities[0].id;
		let r = await admin(['add-admin', '--id', id, second.pk]);
		assert.equal(r.code, 0, r.stderr);
		r = await admin(['add-admin', '--id', id, second.pk]);
		assert.equal(r.code, 1);
		assert.match(r.stderr, /already an admin/);
		r = await admin(['remove-admin', '--id', id, owner.pk]);
		assert.equal(r.code, 0, r.stderr);
		r = await admin(['remove-admin', '--id', id, second.pk]);
		assert.equal(r.code, 1);
		assert.match(r.stderr, /keeps at least one admin/);
		const admins = await stack.query(`SELECT pubkey FROM community_admins WHERE community_id = ${id}`);
		assert.deepEqual(admins, [[second.pk]]);
	});

	test('reset-cursors by id bumps the cursor epoch', async () => {
		const id = stack.communities[0].id;
		const r = await admin(['reset-cursors', '--id', id]);
		assert.equal(r.code, 0, r.stderr);
		assert.equal(r.stdout, 'cursor epoch is now 2\n');
		const rows = await stack.query(`SELECT cursor_epoch FROM communities WHERE id = ${id}`);
		assert.deepEqual(rows, [['2']]);
	});
});
