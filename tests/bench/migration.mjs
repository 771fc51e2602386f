// The online migration test of `scripts/bench.sh --migration`
// (docs/operations.md, "Upgrading to 0021", "Upgrading to 0023" and
// "Upgrading to 0025"): a
// database migrated up to the last migration before FIRST_NEW, filled by
// the bench's fixture (`comb-bench load`, 10,050 artifacts and 10,050 chat
// messages at the reference scale), is migrated to the end by `comb-admin
// migrate` while a writer keeps storing artifact creates and edits through
// the SQL write functions every relay calls (comb_artifact_write, and
// comb_artifact_create_run for runs of two creates), a reader keeps asking
// for heads by tag the way relays of the 0017 release do
// (artifact_head_tags, whether table or view), and another keeps reading
// one artifact's revisions by "#d" the way relays of the 0023 and 0024
// releases do (event_tags and artifact_revisions, whether table or view),
// checking that it finds all of them. Then:
//   - every write during the migration was stored, none waited longer
//     than MAX_WAIT_MS, every read answered and every "#d" read was
//     exact;
//   - every head's tags are those of its current revision (none for a
//     redacted one), artifact_head_tags (now a view) shows the same
//     pairs, artifact_heads_tags is valid and the check that no head's
//     tags are NULL validated;
//   - no artifact revision's d is left in event_tags, a "#d" read of
//     every d finds every revision, and its plan, this release's and the
//     previous one's, reads events_revisions;
//   - every revision is its event's row (0025): no kind-45010 event
//     without its d, type and op, each equal to its signed tags;
//     artifact_revisions is a view and the ledger table gone;
//     events_revisions is valid and the revision checks validated;
//   - the primary key of artifact_heads and artifact_heads_by_home are
//     the covering ones (0024), artifact_heads_live is gone, and the
//     incremental first page walks the key index-only;
//   - a `current` read by tag is answered from artifact_heads_tags.
// Last, what the rollback of docs/operations.md ("Upgrading to 0025")
// relies on: the previous release's redaction marks a revision redacted
// through the view (lock, update), a ledger row inserted into the view
// lands on its event, and the previous release's history read finds
// every revision of an artifact through it.
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
	const dReader = session();
	const writes = { n: 0, refused: 0, ms: [] };
	const reads = { n: 0, failed: 0, ms: [] };
	const dReads = { n: 0, wrong: 0, ms: [] };
	let stop = false;
	// A run of two creates through comb_artifact_create_run, in the
	// channel of a random head; answers the number refused.
	const createRun = (k) => `WITH h AS (SELECT channel_id, type FROM artifact_heads WHERE community_id = ${community}` +
		' AND NOT deleted AND NOT redacted OFFSET floor(random() * 1000) LIMIT 1),' +
		' w AS (SELECT md5(random()::text) || md5(random()::text) AS id, gen_random_uuid() AS d, h.channel_id, h.type, i' +
		' FROM h, generate_series(1, 2) i),' +
		" t AS (SELECT w.*, json_build_array(json_build_array('ar', '1'), json_build_array('d', w.d)," +
		" json_build_array('h', w.channel_id), json_build_array('type', w.type), json_build_array('op', 'create')," +
		` json_build_array('status', 's${k % 5}'), json_build_array('x', 'r' || i)) AS tags FROM w),` +
		` a AS (SELECT array_agg(${community}::bigint ORDER BY i) AS c, array_agg(id ORDER BY i) AS id,` +
		` array_agg('${keys.admin}'::text ORDER BY i) AS pk, array_agg(extract(epoch FROM now())::bigint ORDER BY i) AS at,` +
		" array_agg(json_build_object('id', id, 'tags', tags)::text ORDER BY i) AS raw, array_agg(tags ORDER BY i) AS tags," +
		' array_agg(d ORDER BY i) AS d, array_agg(channel_id ORDER BY i) AS h, array_agg(type ORDER BY i) AS type,' +
		' array_agg(NULL::text ORDER BY i) AS root, array_agg(true ORDER BY i) AS fresh,' +
		` array_agg('{' || comb_write_key(${community}, channel_id, '${keys.admin}', true) || '}' ORDER BY i) AS keys FROM t)` +
		' SELECT count(*) FILTER (WHERE o.outcome <> 0) FROM a,' +
		' LATERAL comb_artifact_create_run(a.c, a.id, a.pk, a.at, a.raw, a.tags, a.d, a.h, a.type, a.root, a.fresh, a.keys) o';
	const write = (k) => {
		if (k % 3 === 2)
			return createRun(k);
		const op = k % 3 ? 'update' : 'create';
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
	// The 0023 and 0024 releases' plain "#d" read
	// (services/relay/proto/filter.c) of a random head's revisions: 't'
	// when it finds exactly the revisions its ledger holds.
	const dReading = (async () => {
		while (!stop) {
			const a = await dReader.ask(`WITH x AS (SELECT d FROM artifact_heads WHERE community_id = ${community}` +
				' OFFSET floor(random() * 1000) LIMIT 1)' +
				` SELECT (SELECT count(*) FROM events e WHERE e.community_id = ${community} AND e.kind = 45010` +
				` AND e.seq IN (SELECT t.event_seq FROM event_tags t WHERE t.community_id = ${community}` +
				" AND t.name = 'd' AND t.value = x.d::text" +
				` UNION ALL SELECT r.seq FROM artifact_revisions r WHERE r.community_id = ${community} AND r.d = x.d))` +
				` = (SELECT count(*) FROM artifact_revisions r WHERE r.community_id = ${community} AND r.d = x.d) FROM x`);
			dReads.n++;
			dReads.ms.push(a.ms);
			if (a.rows[0] !== 't')
				dReads.wrong++;
		}
	})();
	await new Promise((res) => setTimeout(res, 1000));
	log('migrating with writes running');
	const t0 = performance.now();
	const mig = await admin(['migrate']);
	const migrateS = (performance.now() - t0) / 1000;
	await new Promise((res) => setTimeout(res, 1000));
	stop = true;
	await Promise.all([writing, reading, dReading]);
	writer.close();
	reader.close();
	dReader.close();

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
	const dRowsLeft = Number(await q('SELECT count(*) FROM event_tags t JOIN events e ON e.seq = t.event_seq' +
		" WHERE t.name = 'd' AND e.kind = 45010"));
	const dRead = `SELECT count(*) FROM events e WHERE e.community_id = ${community}` +
		` AND e.seq IN (SELECT t.event_seq FROM event_tags t WHERE t.community_id = ${community} AND t.name = 'd'` +
		` AND t.value = ANY (ARRAY(SELECT d::text FROM artifact_heads WHERE community_id = ${community}))` +
		` UNION ALL SELECT r.seq FROM events r WHERE r.community_id = ${community} AND r.d IS NOT NULL` +
		` AND r.d = ANY (ARRAY(SELECT d FROM artifact_heads WHERE community_id = ${community})))`;
	const dFound = Number(await q(dRead));
	const revisions = Number(await q(`SELECT count(*) FROM events WHERE community_id = ${community} AND kind = 45010`));
	// revisions: the FROM of the revisions' branch, up to its WHERE's
	// community test
	const dPlanOf = (revisions) => q(`EXPLAIN SELECT e.seq FROM events e WHERE e.community_id = ${community}` +
		` AND e.seq IN (SELECT t.event_seq FROM event_tags t WHERE t.community_id = ${community} AND t.name = 'd'` +
		" AND t.value = ANY ('{6a1f0c52-2b4e-4f3a-9d6c-0e2b7a8c9d10}'::text[])" +
		` UNION ALL SELECT r.seq FROM ${revisions} r.community_id = ${community}` +
		" AND r.d = ANY ('{6a1f0c52-2b4e-4f3a-9d6c-0e2b7a8c9d10}'::uuid[]))");
	const dPlan = await dPlanOf('events r WHERE r.d IS NOT NULL AND');
	const oldDPlan = await dPlanOf('artifact_revisions r WHERE');
	// Every revision is its event's row, as its signed tags say.
	const tagOf = (name) => `(SELECT t->>1 FROM json_array_elements(e.raw::json -> 'tags') t WHERE t->>0 = '${name}' LIMIT 1)`;
	const unfolded = Number(await q('SELECT count(*) FROM events e WHERE e.kind = 45010 AND e.d IS NULL'));
	const misfolded = Number(await q('SELECT count(*) FROM events e WHERE e.d IS NOT NULL AND' +
		` (e.d::text, e.type, e.op) IS DISTINCT FROM (${tagOf('d')}, ${tagOf('type')}, ${tagOf('op')})`));
	const ledgerKind = await q("SELECT relkind FROM pg_class WHERE oid = to_regclass('artifact_revisions')");
	const ledgerGone = await q("SELECT to_regclass('artifact_revisions_0024') IS NULL");
	const revisionsIndexValid = await q("SELECT coalesce((SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('events_revisions')), false)");
	const revisionChecks = await q("SELECT count(*) FILTER (WHERE convalidated) || '/' || count(*) FROM pg_constraint" +
		" WHERE conname IN ('events_revision_check', 'events_op_check', 'events_prev_check')");
	// The previous release's redaction (its load_revision and record,
	// services/relay/write/artifact_redact.c) through the view, rolled back.
	const target = await q(`SELECT id FROM events WHERE community_id = ${community} AND d IS NOT NULL AND NOT redacted LIMIT 1`);
	const oldRedaction = await q(`BEGIN; SELECT d FROM artifact_revisions WHERE community_id = ${community}` +
		` AND id = '${target}' FOR UPDATE; UPDATE artifact_revisions SET redacted = true WHERE community_id = ${community}` +
		` AND id = '${target}'; SELECT d IS NOT NULL AND redacted FROM events WHERE id = '${target}'; ROLLBACK;`);
	// A write by the previous write function that reaches its ledger
	// INSERT after the swap: the event it stored first gets the revision.
	const lateId = 'c'.repeat(64);
	const lateLedger = await q(`BEGIN; INSERT INTO events (community_id, id, pubkey, created_at, kind, channel_id, raw)` +
		` SELECT community_id, '${lateId}', pubkey, created_at, kind, channel_id, raw FROM events WHERE id = '${target}';` +
		` INSERT INTO artifact_revisions (community_id, id, d, seq, channel_id, type, op)` +
		` SELECT community_id, '${lateId}', gen_random_uuid(), seq, channel_id, 'late', 'create' FROM events WHERE id = '${lateId}';` +
		` SELECT type || '/' || op FROM events WHERE id = '${lateId}' AND d IS NOT NULL; ROLLBACK;`);
	// The previous release's history read of every revision of one
	// artifact with several (services/relay/read/artifact_query.c).
	const [histD, histN] = (await q(`SELECT d, count(*) FROM events WHERE community_id = ${community} AND d IS NOT NULL` +
		' GROUP BY d ORDER BY count(*) DESC, d LIMIT 1')).split('\t');
	const oldHistory = await q(`SELECT count(*) FROM artifact_revisions r LEFT JOIN events e ON e.community_id = r.community_id` +
		` AND e.id = r.id AND NOT r.redacted WHERE r.community_id = ${community} AND r.d = '${histD}' AND e.raw IS NOT NULL`);
	const keyDef = await q("SELECT pg_get_indexdef('artifact_heads_pkey'::regclass)");
	const homeDef = await q("SELECT pg_get_indexdef('artifact_heads_by_home'::regclass)");
	const liveGone = await q("SELECT to_regclass('artifact_heads_live') IS NULL");
	const pagePlan = await q(`EXPLAIN SELECT h.d, h.accepted_seq FROM artifact_heads h WHERE h.community_id = ${community}` +
		" AND h.d > '00000000-0000-0000-0000-000000000000' AND NOT h.deleted AND NOT h.redacted ORDER BY h.d LIMIT 100");
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
	if (dReads.wrong || dReader.errors.length)
		errors.push(`${dReads.wrong} "#d" reads missed revisions ${dReader.errors.join(' ').slice(0, 400)}`);
	if (dRowsLeft)
		errors.push(`${dRowsLeft} artifact d rows left in event_tags`);
	if (dFound !== revisions)
		errors.push(`"#d" finds ${dFound} revisions of ${revisions}`);
	for (const [who, plan] of [['this release\'s', dPlan], ['the previous release\'s', oldDPlan]])
		if (!plan.includes('events_revisions'))
			errors.push(`${who} "#d" read does not use events_revisions:\n${plan}`);
	if (unfolded)
		errors.push(`${unfolded} artifact revisions without their d, type and op in their events`);
	if (misfolded)
		errors.push(`${misfolded} revisions whose d, type or op differ from their signed tags`);
	if (ledgerKind !== 'v' || ledgerGone !== 't')
		errors.push(`artifact_revisions is of kind ${ledgerKind}, the ledger table ${ledgerGone === 't' ? 'gone' : 'still there'}`);
	if (revisionsIndexValid !== 't')
		errors.push('events_revisions is not valid');
	if (revisionChecks !== '3/3')
		errors.push(`revision checks validated: ${revisionChecks}`);
	if (oldRedaction.split('\n').pop() !== 't')
		errors.push(`the previous release's redaction through the view: ${oldRedaction}`);
	if (lateLedger.split('\n').pop() !== 'late/create')
		errors.push(`a ledger row inserted after the swap: ${lateLedger}`);
	if (oldHistory !== histN)
		errors.push(`the previous release's history of ${histD} finds ${oldHistory} revisions of ${histN}`);
	if (!/^CREATE UNIQUE INDEX artifact_heads_pkey .* INCLUDE \(channel_id, accepted_seq, type, deleted, redacted\)$/.test(keyDef))
		errors.push(`artifact_heads_pkey is ${keyDef}`);
	if (!/^CREATE INDEX artifact_heads_by_home .* INCLUDE \(accepted_seq, type, deleted, redacted\)$/.test(homeDef))
		errors.push(`artifact_heads_by_home is ${homeDef}`);
	if (liveGone !== 't')
		errors.push('artifact_heads_live is still there');
	if (!pagePlan.includes('Index Only Scan using artifact_heads_pkey'))
		errors.push(`the first page does not walk the key index-only:\n${pagePlan}`);
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
		d_reads: dReads.n, wrong_d_reads: dReads.wrong, d_read_max_ms: Number(Math.max(0, ...dReads.ms).toFixed(2)),
		d_rows_left: dRowsLeft, d_found: dFound, revisions,
		unfolded_revisions: unfolded, misfolded_revisions: misfolded,
		history_revisions: Number(histN), previous_release_history: Number(oldHistory),
		heads_after: Number(await q('SELECT count(*) FROM artifact_heads')),
		mismatched_heads: mismatched, view_pairs: viewPairs, column_pairs: columnPairs,
		tag_read_plan: plan.split('\n'), d_read_plan: dPlan.split('\n'),
		previous_d_read_plan: oldDPlan.split('\n'), first_page_plan: pagePlan.split('\n'),
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
