// The online migration test of `scripts/bench.sh --migration`
// (docs/operations.md, "Upgrading to 0021"): a database migrated up to the
// last migration before FIRST_NEW, filled by the bench's fixture
// (`comb-bench load`, 10,050 artifacts and 10,050 chat messages at the
// reference scale), is migrated to the end by `comb-admin migrate` while a
// writer keeps storing artifact creates and edits through the SQL write
// functions every relay calls (comb_artifact_write), and a reader keeps
// asking for heads by tag the way relays of the previous release do
// (artifact_head_tags, whether table or view). Then:
//   - every write during the migration was stored, none waited longer
//     than MAX_WAIT_MS, and every read answered;
//   - every head's tags are those of its current revision (none for a
//     redacted one), artifact_head_tags (now a view) shows the same
//     pairs, artifact_heads_tags is valid and the check that no head's
//     tags are NULL validated;
//   - a `current` read by tag is answered from artifact_heads_tags.
// Prints one JSON object on stdout; exit status 1 when a check fails.
//
// Environment (set by scripts/bench.sh): BENCH_PGPORT, BENCH_BUILD_DIR,
// BENCH_OUT, BENCH_SEED; BENCH_MIGRATION_SCALE (default 1).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

const FIRST_NEW = 18;      // the first migration of the upgrade tested
const MAX_WAIT_MS = 3000;  // "a few seconds" at most for any write

const env = process.env;
const buildDir = env.BENCH_BUILD_DIR;
const outDir = env.BENCH_OUT;
const pgPort = env.BENCH_PGPORT;
if (!buildDir || !outDir || !pgPort) {
	console.error('migration.mjs: start it through scripts/bench.sh --migration');
	process.exit(2);
}
const seed = env.BENCH_SEED || 'comb-bench-1';
const scale = env.BENCH_MIGRATION_SCALE || '1';
const benchBin = path.join(buildDir, 'bench-tools', 'comb-bench');
const adminBin = path.join(buildDir, 'bin', 'comb-admin');
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const dbName = 'comb_migration';
const dbUrl = `postgresql://postgres@127.0.0.1:${pgPort}/${dbName}`;
const log = (...m) => console.error('migration:', ...m);

// Runs bin with argv; resolves to its exit code, stdout and stderr.
function run(bin, argv, extraEnv = {}) {
	return new Promise((resolve, reject) => {
		const child = spawn(bin, argv, { env: { ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
		const out = [], err = [];
		child.stdout.on('data', (c) => out.push(c));
		child.stderr.on('data', (c) => err.push(c));
		child.on('error', reject);
		child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
	});
}

// One SQL string through psql on db; resolves to its unaligned output.
async function psql(sql, db = dbName) {
	const r = await run('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1',
		'-p', pgPort, '-U', 'postgres', '-d', db, '-F', '\t', '-c', sql]);
	if (r.code !== 0)
		throw new Error(`psql: ${r.stderr}\n${sql}`);
	return r.stdout.replace(/\n$/, '');
}

// A psql session that runs one statement at a time: ask(sql) resolves to
// its output lines and the milliseconds from sending to the answer.
function session() {
	const child = spawn('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0', '-h', '127.0.0.1',
		'-p', pgPort, '-U', 'postgres', '-d', dbName, '-F', '\t'], { stdio: ['pipe', 'pipe', 'pipe'] });
	const lines = readline.createInterface({ input: child.stdout });
	let waiting = null, got = [];
	const errors = [];
	child.stderr.on('data', (c) => errors.push(c.toString()));
	lines.on('line', (line) => {
		if (line === '--done--') {
			const w = waiting;
			waiting = null;
			w.resolve({ rows: got, ms: performance.now() - w.t0 });
			got = [];
		} else {
			got.push(line);
		}
	});
	return {
		errors,
		ask(sql) {
			return new Promise((resolve) => {
				waiting = { resolve, t0: performance.now() };
				child.stdin.write(`${sql};\n\\echo --done--\n`);
			});
		},
		close() {
			child.stdin.end('\\q\n');
		},
	};
}

async function main() {
	const started = Date.now();
	const keys = JSON.parse((await run(benchBin, ['keys', '--seed', seed, '--scale', scale])).stdout);
	// The migrations before FIRST_NEW, as a release before the upgrade
	// had them.
	const oldDir = fs.mkdtempSync(path.join(os.tmpdir(), 'comb-migrations-'));
	for (const f of fs.readdirSync(path.join(root, 'migrations'))) {
		const m = /^(\d+)_.*\.sql$/.exec(f);
		if (m && Number(m[1]) < FIRST_NEW)
			fs.copyFileSync(path.join(root, 'migrations', f), path.join(oldDir, f));
	}
	await psql(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`, 'postgres');
	await psql(`CREATE DATABASE ${dbName}`, 'postgres');
	const admin = (argv) => run(adminBin, argv, { COMB_DATABASE_URL: dbUrl });
	let r = await admin(['migrate', '--dir', oldDir]);
	fs.rmSync(oldDir, { recursive: true });
	if (r.code !== 0)
		throw new Error(`migrate up to ${FIRST_NEW - 1}: ${r.stderr}`);
	r = await admin(['community', 'create', '--host', 'localhost', '--owner', keys.admin, '--name', 'migration']);
	if (r.code !== 0)
		throw new Error(`community create: ${r.stderr}`);
	const community = Number(r.stdout.trim().split('\n').pop());
	log(`loading the fixture at scale ${scale}`);
	r = await run(benchBin, ['load', '--seed', seed, '--scale', scale, '--community', String(community),
		'--db', dbUrl, '--manifest', path.join(outDir, 'migration-manifest.tsv')]);
	if (r.code !== 0)
		throw new Error(`load: ${r.stderr}`);
	const heads = Number(await psql('SELECT count(*) FROM artifact_heads'));

	// The writer: creates (new d) and edits of a random head, alternately,
	// with tags that change at every write; every outcome must be 0.
	const writer = session();
	const reader = session();
	const writes = { n: 0, refused: 0, ms: [] };
	const reads = { n: 0, failed: 0, ms: [] };
	let stop = false;
	const write = (k) => {
		const op = k % 2 ? 'update' : 'create';
		const extra = `json_build_array(json_build_array('status', 's${k % 5}'), json_build_array('x', '${k}'),` +
			" json_build_array('ar', '1'))";
		return `WITH h AS (SELECT * FROM artifact_heads WHERE community_id = ${community}` +
			' AND NOT deleted AND NOT redacted OFFSET floor(random() * 1000) LIMIT 1),' +
			" w AS (SELECT md5(random()::text) || md5(random()::text) AS id," +
			` CASE WHEN '${op}' = 'create' THEN gen_random_uuid() ELSE h.d END AS d, h.channel_id, h.type,` +
			' h.revision_id FROM h),' +
			` t AS (SELECT w.*, (json_build_array(json_build_array('d', w.d), json_build_array('h', w.channel_id),` +
			` json_build_array('type', w.type), json_build_array('op', '${op}'))::jsonb || ${extra}::jsonb)::json AS tags FROM w)` +
			` SELECT o.outcome FROM t, LATERAL comb_artifact_write(${community}, t.id, '${keys.admin}',` +
			" extract(epoch FROM now())::bigint, json_build_object('id', t.id, 'tags', t.tags)::text, t.tags," +
			` t.d, t.channel_id, t.type, '${op}', CASE WHEN '${op}' = 'update' THEN t.revision_id END, NULL, true,` +
			` ARRAY[comb_write_key(${community}, t.channel_id, '${keys.admin}', true)], NULL) o`;
	};
	const writing = (async () => {
		for (let k = 0; !stop; k++) {
			const a = await writer.ask(write(k));
			writes.n++;
			writes.ms.push(a.ms);
			if (a.rows[0] !== '0')
				writes.refused++;
		}
	})();
	// The previous release's tag read: heads whose status is s1.
	const reading = (async () => {
		while (!stop) {
			const a = await reader.ask('SELECT count(*) FROM artifact_heads h' +
				` WHERE h.community_id = ${community} AND NOT h.deleted AND NOT h.redacted` +
				' AND EXISTS (SELECT 1 FROM artifact_head_tags t WHERE t.community_id = h.community_id' +
				" AND t.d = h.d AND t.name = 'status' AND md5(t.value) = ANY (ARRAY[md5('s1')])" +
				" AND t.value = ANY (ARRAY['s1']))");
			reads.n++;
			reads.ms.push(a.ms);
			if (!/^\d+$/.test(a.rows[0] ?? ''))
				reads.failed++;
		}
	})();
	await new Promise((res) => setTimeout(res, 1000));
	log('migrating with writes running');
	const t0 = performance.now();
	const mig = await admin(['migrate']);
	const migrateS = (performance.now() - t0) / 1000;
	await new Promise((res) => setTimeout(res, 1000));
	stop = true;
	await Promise.all([writing, reading]);
	writer.close();
	reader.close();

	const q = async (sql) => psql(sql);
	const mismatched = Number(await q('SELECT count(*) FROM artifact_heads h JOIN events e ON e.seq = h.accepted_seq' +
		" WHERE h.tags IS DISTINCT FROM CASE WHEN h.redacted THEN '{}'::jsonb" +
		" ELSE comb_head_tags(e.raw::json -> 'tags') END"));
	const viewPairs = Number(await q('SELECT count(*) FROM artifact_head_tags'));
	const columnPairs = Number(await q('SELECT coalesce(sum(n), 0) FROM (SELECT (SELECT count(*)' +
		' FROM jsonb_each(h.tags) e, jsonb_array_elements(e.value)) AS n FROM artifact_heads h WHERE NOT h.redacted) s'));
	const indexValid = await q("SELECT coalesce((SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('artifact_heads_tags')), false)");
	const checked = await q("SELECT convalidated FROM pg_constraint WHERE conname = 'artifact_heads_tags_set'");
	const tableGone = await q("SELECT relkind FROM pg_class WHERE oid = to_regclass('artifact_head_tags')");
	const plan = await q(`EXPLAIN SELECT count(*) FROM artifact_heads h WHERE h.community_id = ${community}` +
		` AND NOT h.deleted AND NOT h.redacted AND h.tags @? '$."x"[*] ? (@ == "7")'::jsonpath`);
	const maxWrite = Math.max(0, ...writes.ms);
	const sorted = [...writes.ms].sort((a, b) => a - b);
	const errors = [];
	if (mig.code !== 0)
		errors.push(`migrate failed: ${mig.stderr}`);
	if (writes.refused)
		errors.push(`${writes.refused} writes refused`);
	if (writer.errors.length || reader.errors.length)
		errors.push(`psql errors: ${[...writer.errors, ...reader.errors].join(' ').slice(0, 400)}`);
	if (maxWrite > MAX_WAIT_MS)
		errors.push(`a write waited ${maxWrite.toFixed(0)} ms`);
	if (reads.failed)
		errors.push(`${reads.failed} reads failed`);
	if (mismatched)
		errors.push(`${mismatched} heads with tags other than their revision's`);
	if (viewPairs !== columnPairs)
		errors.push(`the view shows ${viewPairs} pairs, the heads hold ${columnPairs}`);
	if (indexValid !== 't')
		errors.push('artifact_heads_tags is not valid');
	if (checked !== 't')
		errors.push('artifact_heads_tags_set is not validated');
	if (tableGone !== 'v')
		errors.push('artifact_head_tags is not a view');
	if (!plan.includes('artifact_heads_tags'))
		errors.push(`a read by tag does not use artifact_heads_tags:\n${plan}`);
	const out = {
		test: 'online migration', scale: Number(scale), heads_before: heads,
		migrations: mig.stdout.trim().split('\n'), migrate_s: Number(migrateS.toFixed(2)),
		writes: writes.n, refused_writes: writes.refused,
		write_p50_ms: Number((sorted[Math.floor(sorted.length / 2)] ?? 0).toFixed(2)),
		write_max_ms: Number(maxWrite.toFixed(2)),
		reads: reads.n, failed_reads: reads.failed, read_max_ms: Number(Math.max(0, ...reads.ms).toFixed(2)),
		heads_after: Number(await q('SELECT count(*) FROM artifact_heads')),
		mismatched_heads: mismatched, view_pairs: viewPairs, column_pairs: columnPairs,
		tag_read_plan: plan.split('\n'),
		load_avg_1m: Number(os.loadavg()[0].toFixed(2)),
		wall_s: (Date.now() - started) / 1000,
		ok: errors.length === 0, errors,
	};
	process.stdout.write(`${JSON.stringify(out)}\n`);
	return out.ok ? 0 : 1;
}

main().then((code) => process.exit(code), (err) => {
	log(`failed: ${err.stack || err}`);
	process.exit(1);
});
