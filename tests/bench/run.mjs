// The driver of `make bench` / `make bench-quick` (docs/benchmarks.md),
// started by scripts/bench.sh once the private PostgreSQL and Redis run.
// It creates and migrates the database, loads the fixtures with
// `comb-bench load`, starts comb-capture and two relay nodes, runs every
// scenario of BENCHMARKS.md through comb-bench (tests/bench/*.c) and prints
// ONE JSON object per scenario on stdout: the figures, the floor, the
// ratio, the target and whether it was met, whether what was read was
// correct, the relays' peak RSS, the PostgreSQL time per statement
// (pg_stat_statements) and the machine. Everything else goes to stderr.
//
// Exit status: 1 when a scenario read something wrong or could not run;
// with BENCH_ENFORCE=1 (full mode) also when a target was missed.
//
// usage: node tests/bench/run.mjs --mode full|quick [--only a,b]
// Environment (set by scripts/bench.sh): BENCH_PGPORT, BENCH_PG_LOG,
// BENCH_REDIS_URL, BENCH_BUILD_DIR, BENCH_OUT, BENCH_STACK, BENCH_SEED.

import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const args = process.argv.slice(2);
const argOf = (name, def) => {
	const i = args.indexOf(name);
	return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
const mode = argOf('--mode', 'full');
const only = argOf('--only', '') ? argOf('--only', '').split(',') : null;
const quick = mode === 'quick';

const env = process.env;
const buildDir = env.BENCH_BUILD_DIR;
const outDir = env.BENCH_OUT;
const pgPort = env.BENCH_PGPORT;
const redisUrl = env.BENCH_REDIS_URL;
const seed = env.BENCH_SEED || 'comb-bench-1';
if (!buildDir || !outDir || !pgPort || !redisUrl) {
	console.error('run.mjs: start it through scripts/bench.sh (make bench)');
	process.exit(2);
}
const benchBin = path.join(buildDir, 'bench-tools', 'comb-bench');
const relayBin = path.join(buildDir, 'bin', 'comb-relay');
const captureBin = path.join(buildDir, 'bin', 'comb-capture');
const adminBin = path.join(buildDir, 'bin', 'comb-admin');
const policyPlugin = path.join(buildDir, 'lib', 'policy_default.so');
const logDir = path.join(outDir, 'logs');
fs.mkdirSync(logDir, { recursive: true });

// What each mode runs. The quick mode is the reference layout at 1/10
// scale with fewer clients; its targets are reported, not enforced.
const P = quick ? {
	scale: 0.1, runs: 2, reads: 200, liveSubs: 100, liveEdits: 20, visWrites: 50,
	burst: 100, reconnects: 100, conns: 500, hold: 1, settle: 11, explain: false,
} : {
	scale: 1, runs: 3, reads: 1000, liveSubs: 1000, liveEdits: 200, visWrites: 200,
	burst: 1000, reconnects: 1000, conns: 5000, hold: 5, settle: 12, explain: true,
};
// BENCH_EXPLAIN=1 or 0 overrides whether plans are captured.
if (env.BENCH_EXPLAIN)
	P.explain = env.BENCH_EXPLAIN === '1';
const dbName = 'comb_bench';
const dbUrl = `postgresql://postgres@127.0.0.1:${pgPort}/${dbName}`;
const common = ['--seed', seed, '--scale', String(P.scale)];

const log = (...m) => console.error('bench:', ...m);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------
// processes

function runCapture(bin, argv, opts = {}) {
	return new Promise((resolve, reject) => {
		const child = spawn(bin, argv, { env: opts.env ?? env, stdio: ['ignore', 'pipe', 'pipe'] });
		const out = [];
		const err = [];
		child.stdout.on('data', (c) => out.push(c));
		child.stderr.on('data', (c) => {
			err.push(c);
			if (opts.echo !== false)
				process.stderr.write(c);
		});
		child.on('error', reject);
		child.on('close', (code) => resolve({
			code,
			stdout: Buffer.concat(out).toString('utf8'),
			stderr: Buffer.concat(err).toString('utf8'),
		}));
	});
}

// The environment of every comb-bench command: its heap in transparent
// huge pages where the kernel grants them on request (glibc 2.35 and
// later; ignored elsewhere). The client copies and scans answers of
// megabytes inside the clock; with 4 KiB pages `resume_catchup`'s
// WebSocket side took nearly twice as long on a virtual machine, time
// that was the client's and not the relay's (docs/benchmarks-history.md, "The
// client's heap in huge pages").
const clientEnv = {
	...env,
	GLIBC_TUNABLES: [env.GLIBC_TUNABLES, 'glibc.malloc.hugetlb=1'].filter(Boolean).join(':'),
};

// Runs a comb-bench subcommand; resolves to its JSON (with exit status).
async function bench(cmd, extra = []) {
	const r = await runCapture(benchBin, [cmd, ...common, '--community', String(state.community), ...extra],
		{ env: clientEnv });
	const line = r.stdout.trim().split('\n').filter(Boolean).pop();
	let json = null;
	try {
		json = JSON.parse(line);
	} catch {
		json = { ok: false, errors: [`comb-bench ${cmd} printed no result (exit ${r.code})`] };
	}
	json.exit = r.code;
	return json;
}

async function psql(sql, db = dbName) {
	const r = await runCapture('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
		'-h', '127.0.0.1', '-p', pgPort, '-U', 'postgres', '-d', db, '-F', '\t', '-c', sql],
	{ echo: false });
	if (r.code !== 0)
		throw new Error(`psql failed: ${r.stderr}\n${sql}`);
	return r.stdout.replace(/\n$/, '');
}

function freePort() {
	return new Promise((resolve, reject) => {
		const srv = net.createServer();
		srv.on('error', reject);
		srv.listen(0, '127.0.0.1', () => {
			const { port } = srv.address();
			srv.close(() => resolve(port));
		});
	});
}

// GET urlPath of the relay listening on port: resolves to {status, body}
// (status 0 when it did not answer).
function httpGet(port, urlPath) {
	return new Promise((resolve) => {
		const req = http.request({ host: '127.0.0.1', port, path: urlPath,
			headers: { host: `localhost:${port}` }, timeout: 2000 }, (res) => {
			let body = '';
			res.setEncoding('utf8');
			res.on('data', (c) => { body += c; });
			res.on('end', () => resolve({ status: res.statusCode, body }));
		});
		req.on('error', () => resolve({ status: 0, body: '' }));
		req.on('timeout', () => req.destroy());
		req.end();
	});
}

// The revision cache warm of the relay listening on port, from its
// /metrics: {running, events, bytes, seconds}, or null when unreadable.
async function warmOf(port) {
	const { body } = await httpGet(port, '/metrics');
	const v = (name) => {
		const m = new RegExp(`^comb_revision_cache_warm_${name} (\\S+)$`, 'm').exec(body);
		return m ? Number(m[1]) : null;
	};
	const warm = { running: v('running'), events: v('events'), bytes: v('bytes'), seconds: v('seconds') };
	return warm.running === null ? null : warm;
}

const services = [];

function startService(name, bin, extraEnv) {
	const file = path.join(logDir, `${name}.log`);
	const fd = fs.openSync(file, 'w');
	const child = spawn(bin, [], { env: { PATH: env.PATH, ...extraEnv }, stdio: ['ignore', fd, fd] });
	fs.closeSync(fd);
	const svc = { name, child, file, exited: null };
	svc.done = new Promise((resolve) => child.on('exit', (code, sig) => {
		svc.exited = { code, sig };
		resolve();
	}));
	services.push(svc);
	return svc;
}

async function stopService(svc) {
	if (svc.exited)
		return;
	svc.child.kill('SIGTERM');
	const t = setTimeout(() => svc.child.kill('SIGKILL'), 10000);
	await svc.done;
	clearTimeout(t);
}

process.on('exit', () => {
	for (const s of services) {
		if (!s.exited)
			try { s.child.kill('SIGKILL'); } catch { /* gone */ }
	}
});
for (const sig of ['SIGINT', 'SIGTERM']) {
	process.once(sig, () => process.exit(130));
}

async function startRelay(i, extraEnv = {}) {
	const port = await freePort();
	const svc = startService(`relay${i}`, relayBin, {
		COMB_DATABASE_URL: dbUrl,
		COMB_REDIS_URL: redisUrl,
		COMB_RELAY_SECRET_KEY: state.relayKey,
		COMB_LISTEN: `127.0.0.1:${port}`,
		COMB_POLICY_PLUGIN: policyPlugin,
		COMB_INCREMENTAL_ENABLED: 'true',
		COMB_CAPTURE_ENDPOINT: state.captureEndpoint,
		COMB_WRITE_RATE: '0',
		COMB_LOG_LEVEL: 'warn',
		COMB_NUM_THREADS: '640',
		// every benchmark client comes from 127.0.0.1
		COMB_MAX_CONNECTIONS_PER_IP: '100000',
		// BENCH_REVISION_CACHE_MB=0 runs every scenario without the cache
		...(env.BENCH_REVISION_CACHE_MB !== undefined
			? { COMB_REVISION_CACHE_MB: env.BENCH_REVISION_CACHE_MB } : {}),
		// BENCH_REVISION_CACHE_WARM_MB=0 starts the nodes without the warm
		...(env.BENCH_REVISION_CACHE_WARM_MB !== undefined
			? { COMB_REVISION_CACHE_WARM_MB: env.BENCH_REVISION_CACHE_WARM_MB } : {}),
		// BENCH_RELAY_ENV="COMB_X=1,COMB_Y=2" sets more of every node's
		// settings, for experiments
		...Object.fromEntries((env.BENCH_RELAY_ENV ?? '').split(',').filter(Boolean)
			.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])),
		...extraEnv,
	});
	const deadline = Date.now() + 30000;
	while ((await httpGet(port, '/readyz')).status !== 200) {
		if (svc.exited || Date.now() > deadline)
			throw new Error(`relay ${i} did not become ready; see ${svc.file}`);
		await sleep(100);
	}
	// A node warms its revision cache in the background when it starts
	// (COMB_REVISION_CACHE_WARM_MB: the newest stored events, the chat
	// messages among them). The scenarios measure a node that has done
	// so, as one that has served for a second would have, and do not
	// share the machine with it; how long it took is logged.
	let warm = await warmOf(port);
	while (warm?.running === 1) {
		if (svc.exited || Date.now() > deadline)
			throw new Error(`relay ${i} did not end its revision cache warm; see ${svc.file}`);
		await sleep(50);
		warm = await warmOf(port);
	}
	if (warm)
		log(`relay ${i}: revision cache warm: ${warm.events} events, ${warm.bytes} bytes in ${warm.seconds} s`);
	return { svc, port, pid: svc.child.pid, addr: `127.0.0.1:${port}`, host: `localhost:${port}`, warm };
}

// ---------------------------------------------------------------------------
// measurements around each scenario

function procStatus(pid, field) {
	try {
		const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
		const m = new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(text);
		return m ? Number(m[1]) : null;
	} catch {
		return null;
	}
}

// The fields of /proc/PID/stat after "pid (comm) ", or null: state is
// field 0, ppid 1, utime 11, stime 12, cutime 13 and cstime 14 (its reaped
// children's), times in clock ticks of 1/100 s (USER_HZ on Linux).
function procStat(pid) {
	try {
		const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
		return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
	} catch {
		return null;
	}
}

// The CPU seconds (user and system) of a process's stat fields (procStat).
function statCpuSeconds(f) {
	return (Number(f[11]) + Number(f[12])) / 100;
}

// The CPU seconds (user and system) process pid has used so far, or null.
function procCpuSeconds(pid) {
	const f = procStat(pid);
	return f ? statCpuSeconds(f) : null;
}

// Resets VmHWM to the current RSS (Linux clear_refs 5), so that each
// scenario reports its own peak.
function resetPeak(pid) {
	try {
		fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
		return true;
	} catch {
		return false;
	}
}

async function pgReset() {
	await psql('SELECT pg_stat_statements_reset()');
}

// The statements that took the most PostgreSQL time during a scenario
// (the first n, with queries cut at `width` characters).
async function pgTop(n = 4, width = 140) {
	const rows = await psql(
		'SELECT calls, round(total_exec_time::numeric, 2), round(mean_exec_time::numeric, 3),' +
		` left(regexp_replace(query, '\\s+', ' ', 'g'), ${width})` +
		' FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())' +
		" AND query NOT ILIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT " + n);
	return rows === '' ? [] : rows.split('\n').map((r) => {
		const [calls, total, mean, query] = r.split('\t');
		return { query, calls: Number(calls), total_ms: Number(total), mean_ms: Number(mean) };
	});
}

// pg_stat_statements.track 'all' (nested statements counted on their
// own) or back to its default, for the scenarios that break PostgreSQL's
// time down statement by statement.
async function trackAll(on) {
	await psql(on ? "ALTER SYSTEM SET pg_stat_statements.track = 'all'"
		: 'ALTER SYSTEM RESET pg_stat_statements.track');
	await psql('SELECT pg_reload_conf()');
	await sleep(300);
}

// The PostgreSQL server's postmaster (the parent of its checkpointer),
// found once.
let postmasterPid = null;
async function postmaster() {
	postmasterPid ??= procStatus(Number(await psql(
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")), 'PPid');
	return postmasterPid;
}

// The CPU seconds the whole PostgreSQL server has used so far: the
// postmaster, its live children (backends, the WAL writer, autovacuum and
// the rest) and the children it has reaped (cutime and cstime of its
// /proc stat), or null.
async function pgCpuSeconds() {
	const pm = await postmaster();
	const own = pm === null ? null : procStat(pm);
	let total;

	if (!own)
		return null;
	total = statCpuSeconds(own) + (Number(own[13]) + Number(own[14])) / 100;
	for (const pid of fs.readdirSync('/proc')) {
		const f = /^[0-9]+$/.test(pid) ? procStat(pid) : null;

		if (f && Number(f[1]) === pm)
			total += statCpuSeconds(f);
	}
	return total;
}

// Where the cluster's WAL stands, its insert position in bytes, and
// PostgreSQL's CPU seconds so far, for perUnit. (Not pg_stat_wal: backends
// report their WAL there when idle, an idle one only after ten seconds,
// so it trails a scenario that just ended.)
async function pgMark() {
	return {
		lsn: Number(await psql("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')")),
		cpu: await pgCpuSeconds(),
	};
}

const ofThisDb = 'dbid = (SELECT oid FROM pg_database WHERE datname = current_database())';

// What the statements matching `where` (SQL on pg_stat_statements) cost
// since the last reset: calls, rows, execution ms, WAL records, FPIs and
// bytes, summed.
async function pgCost(where) {
	const [calls, rows, ms, records, fpi, bytes] = (await psql(
		'SELECT coalesce(sum(calls), 0), coalesce(sum(rows), 0), coalesce(sum(total_exec_time), 0),' +
		' coalesce(sum(wal_records), 0), coalesce(sum(wal_fpi), 0), coalesce(sum(wal_bytes), 0)' +
		` FROM pg_stat_statements WHERE ${ofThisDb} AND (${where})`)).split('\t').map(Number);
	return { calls, rows, ms, records, fpi, bytes };
}

// The statements nested in others (track 'all') that took the most time,
// per unit of `per` (events stored): us, WAL records and bytes.
async function pgNested(per, n = 12) {
	const rows = await psql(
		'SELECT calls, total_exec_time, wal_records, wal_bytes,' +
		" left(regexp_replace(query, '\\s+', ' ', 'g'), 160) FROM pg_stat_statements" +
		` WHERE ${ofThisDb} AND NOT toplevel ORDER BY total_exec_time DESC LIMIT ${n}`);
	return rows === '' ? [] : rows.split('\n').map((r) => {
		const [calls, ms, records, bytes, query] = r.split('\t');
		return {
			query, calls: Number(calls), us_per_event: round(Number(ms) * 1e3 / per, 1),
			wal_records_per_event: round(Number(records) / per, 2),
			wal_bytes_per_event: round(Number(bytes) / per, 0),
		};
	});
}

// Per unit (events or rows): PostgreSQL's us, WAL records, bytes and
// full-page images of the statements (pg_stat_statements), and the WAL
// bytes the whole cluster wrote meanwhile (its insert position).
function perUnit(cost, w0, w1, n) {
	return n ? {
		pg_us: round(cost.ms * 1e3 / n, 1),
		pg_cpu_us: w0.cpu !== null && w1.cpu !== null ? round((w1.cpu - w0.cpu) * 1e6 / n, 1) : null,
		wal_records: round(cost.records / n, 2),
		wal_bytes: round(cost.bytes / n, 0),
		wal_fpi: round(cost.fpi / n, 3),
		cluster_wal_bytes: round((w1.lsn - w0.lsn) / n, 0),
		statements: cost.calls,
	} : null;
}

const results = [];
let machine = null;

async function scenario(name, relays, fn) {
	if (only && !only.includes(name))
		return null;
	log(`scenario ${name}`);
	const cpu0 = {};
	for (const r of relays) {
		resetPeak(r.pid);
		cpu0[r.svc.name] = procCpuSeconds(r.pid);
	}
	await pgReset();
	// Other work on the machine shows here (these machines are shared).
	const load0 = round(os.loadavg()[0], 2);
	const t0 = Date.now();
	let res;
	try {
		res = await fn();
	} catch (err) {
		res = { ok: false, pass: false, errors: [String(err.stack || err)] };
	}
	const peak = {}, cpu = {};
	for (const r of relays) {
		peak[r.svc.name] = procStatus(r.pid, 'VmHWM');
		const used = procCpuSeconds(r.pid);
		cpu[r.svc.name] = used === null || cpu0[r.svc.name] === null ? null
			: round(used - cpu0[r.svc.name], 2);
	}
	// Every statement of the scenario, kept beside the results.
	const all = await pgTop(40, 2000).catch(() => []);
	fs.writeFileSync(path.join(outDir, `pg-${name}.txt`), all.map((q) =>
		`calls ${q.calls}  total ${q.total_ms} ms  mean ${q.mean_ms} ms\n  ${q.query}`).join('\n\n') + '\n');
	const out = {
		scenario: name,
		mode,
		...res,
		relay_peak_rss_kib: peak,
		relay_cpu_s: cpu,
		pg_top_statements: await pgTop().catch(() => []),
		wall_s: (Date.now() - t0) / 1000,
		load_avg_1m_before: load0,
		machine,
	};
	if (quick)
		out.note = 'quick mode: 1/10 scale; targets are those of the reference scale, reported not enforced';
	results.push(out);
	process.stdout.write(`${JSON.stringify(out)}\n`);
	return out;
}

const round = (x, d = 3) => (x === null || x === undefined ? null : Number(x.toFixed(d)));

// ---------------------------------------------------------------------------
// auto_explain: plans of the relay's own queries with their real parameters

async function explainOn() {
	for (const s of ['log_min_duration_statement = 0',
		'auto_explain.log_min_duration = 0', 'auto_explain.log_analyze = on',
		'auto_explain.log_buffers = on', 'auto_explain.log_timing = on',
		'auto_explain.log_nested_statements = on', 'auto_explain.log_verbose = off'])
		await psql(`ALTER SYSTEM SET ${s}`);
	await psql('SELECT pg_reload_conf()');
	await sleep(500);
}

async function explainOff() {
	await psql('ALTER SYSTEM RESET auto_explain.log_min_duration');
	await psql('ALTER SYSTEM RESET log_min_duration_statement');
	await psql('SELECT pg_reload_conf()');
	await sleep(300);
}

function logSize() {
	try {
		return fs.statSync(env.BENCH_PG_LOG).size;
	} catch {
		return 0;
	}
}

function logSince(from) {
	try {
		const fd = fs.openSync(env.BENCH_PG_LOG, 'r');
		const size = fs.fstatSync(fd).size;
		const buf = Buffer.alloc(Math.max(0, size - from));
		fs.readSync(fd, buf, 0, buf.length, from);
		fs.closeSync(fd);
		return buf.toString('utf8');
	} catch {
		return '';
	}
}

// Re-runs, with EXPLAIN (ANALYZE, BUFFERS), the first statement logged
// since `from` whose text contains `needle`, with the parameters the relay
// sent (log_min_duration_statement logs them), prepared the way the relay
// prepares its statements, unnamed or named (parameter types inferred).
// Appends the plan to explain-plans.txt.
async function explainStatement(title, from, needle) {
	const lines = logSince(from).split('\n');
	for (let i = 0; i < lines.length; i++) {
		const m = /execute [^:\s]+: (.*)$/.exec(lines[i]);
		if (!m || !m[1].includes(needle))
			continue;
		const detail = /DETAIL: {2}parameters: (.*)$/.exec(lines[i + 1] ?? '');
		const params = [];
		if (detail) {
			const re = /\$(\d+) = ('(?:[^']|'')*'|NULL)/g;
			let p;
			while ((p = re.exec(detail[1])))
				params[Number(p[1]) - 1] = p[2];
		}
		const exec = params.length ? `EXECUTE q(${params.join(', ')})` : 'EXECUTE q';
		const sql = `PREPARE q AS ${m[1]};\n` +
			`EXPLAIN (ANALYZE, BUFFERS) ${exec};\n` +
			`EXPLAIN (ANALYZE, BUFFERS) ${exec};\n`;
		const file = path.join(outDir, 'explain.sql');
		fs.writeFileSync(file, sql);
		const r = await runCapture('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1',
			'-p', pgPort, '-U', 'postgres', '-d', dbName, '-f', file], { echo: false });
		// The second run's plan: caches warm, as in the scenario.
		const plans = r.stdout.split(/\n(?= +QUERY PLAN)/);
		const text = `== ${title}\n-- ${m[1]}\n-- parameters: ${detail ? detail[1] : '(none)'}\n` +
			`${plans[plans.length - 1] || r.stderr}\n\n`;
		fs.appendFileSync(path.join(outDir, 'explain-plans.txt'), text);
		return;
	}
	fs.appendFileSync(path.join(outDir, 'explain-plans.txt'),
		`== ${title}\n(no statement containing ${JSON.stringify(needle)} was logged)\n\n`);
}

// Saves the plans auto_explain logged since `from` to explain-<name>.txt.
function savePlans(name, from) {
	const text = logSince(from);
	if (!text)
		return;
	// Blocks: a "duration: ... plan:" line and its indented continuation.
	const blocks = [];
	let cur = null;
	for (const line of text.split('\n')) {
		if (/LOG: {2}duration: [\d.]+ ms {2}plan:/.test(line)) {
			cur = { head: line, lines: [] };
			blocks.push(cur);
		} else if (cur && /^\s/.test(line)) {
			cur.lines.push(line);
		} else {
			cur = null;
		}
	}
	const body = blocks.map((b) => `${b.head}\n${b.lines.join('\n')}`).join('\n\n');
	fs.writeFileSync(path.join(outDir, `explain-${name}.txt`), body);
	log(`saved ${blocks.length} plans to ${path.join(outDir, `explain-${name}.txt`)}`);
}

// ---------------------------------------------------------------------------
// the run

const state = { community: 1, relayKey: null, captureEndpoint: null };

async function main() {
	const started = Date.now();
	const keys = JSON.parse((await runCapture(benchBin, ['keys', ...common], { env: clientEnv })).stdout);
	state.keys = keys;
	state.relayKey = crypto.randomBytes(32).toString('hex');
	const manifest = path.join(outDir, 'manifest.tsv');
	const cursor0 = path.join(outDir, 'cursor-initial.txt');
	const cursorX = path.join(outDir, 'cursor-explain.txt');

	await psql(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`, 'postgres');
	await psql(`CREATE DATABASE ${dbName}`, 'postgres');
	const mig = await runCapture(adminBin, ['migrate'], { env: { PATH: env.PATH, COMB_DATABASE_URL: dbUrl } });
	if (mig.code !== 0)
		throw new Error(`comb-admin migrate failed: ${mig.stderr}`);
	await psql('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
	const cc = await runCapture(adminBin, ['community', 'create', '--host', 'localhost',
		'--host', '127.0.0.1', '--owner', keys.admin, '--name', 'bench'],
	{ env: { PATH: env.PATH, COMB_DATABASE_URL: dbUrl } });
	if (cc.code !== 0)
		throw new Error(`comb-admin community create failed: ${cc.stderr}`);
	state.community = Number(cc.stdout.trim().split('\n').pop());

	const pgVersion = await psql('SHOW server_version');
	const cpus = os.cpus();
	// What a system call, a thread wake-up and a page fault cost here.
	const { command, exit, ...probe } = await bench('machine-probe');
	machine = {
		cores: cpus.length,
		cpu: cpus[0]?.model ?? null,
		memory_gib: round(os.totalmem() / 2 ** 30, 1),
		kernel: os.release(),
		postgresql: pgVersion,
		probe: exit === 0 ? probe : null,
		client_tunables: clientEnv.GLIBC_TUNABLES,
		date: new Date().toISOString(),
	};

	log(`loading fixtures (scale ${P.scale}: ${keys.artifacts} artifacts, ${keys.memberships} memberships)`);
	const load = await bench('load', ['--db', dbUrl, '--manifest', manifest]);
	if (load.exit !== 0)
		throw new Error('fixture load failed');
	log(`fixtures: ${JSON.stringify(load)}`);
	state.load = load;

	state.captureEndpoint = `tcp://127.0.0.1:${await freePort()}`;
	const capture = startService('capture', captureBin, {
		COMB_DATABASE_URL: dbUrl,
		COMB_REDIS_URL: redisUrl,
		COMB_CAPTURE_ENDPOINT: state.captureEndpoint,
		COMB_LOG_LEVEL: 'warn',
	});
	await sleep(300);
	if (capture.exited)
		throw new Error(`comb-capture exited; see ${capture.file}`);
	// Node 0 may serve a sync of every artifact (max_events raised for the
	// run) and a plain REQ of every chat message (max_limit raised); node 1
	// keeps the defaults.
	const node0 = await startRelay(0, {
		COMB_SYNC_MAX_EVENTS: String(Math.max(4096, keys.artifacts + 1000)),
		COMB_MAX_LIMIT: String(Math.max(1000, keys.chats)),
	});
	const node1 = await startRelay(1);
	const nodes = [node0, node1];
	const at = (n) => ['--addr', n.addr, '--host', n.host];
	const overNodes = ['--addrs', nodes.map((n) => n.addr).join(','),
		'--hosts', nodes.map((n) => n.host).join(',')];

	// incremental_floor
	let floor = null;
	await scenario('incremental_floor', nodes, async () => {
		floor = await bench('floor-copy', ['--db', dbUrl, '--runs', String(P.runs)]);
		return {
			seconds: round(floor.seconds, 4), runs: floor.runs?.map((x) => round(x, 4)),
			rows: floor.rows, expected_rows: floor.expected_rows, bytes: floor.bytes,
			target: 'the floor of incremental_initial (one COPY of the same rows through libpq)',
			ok: floor.ok === true && floor.exit === 0, pass: floor.ok === true,
		};
	});

	// incremental_initial
	const initial = async () => bench('incr-initial', [...at(node0), '--manifest', manifest,
		'--cursor-out', cursor0, '--limit', '100', '--runs', String(P.runs)]);
	let haveCursor = false;
	await scenario('incremental_initial', nodes, async () => {
		const r = await initial();
		haveCursor = r.ok === true;
		if (!floor)
			floor = await bench('floor-copy', ['--db', dbUrl, '--runs', String(P.runs)]);
		const ratio = r.seconds && floor.seconds ? r.seconds / floor.seconds : null;
		return {
			seconds: round(r.seconds, 4), runs: r.runs?.map((x) => round(x, 4)),
			pages: r.pages, items: r.items, distinct_artifacts: r.distinct,
			expected_artifacts: keys.artifacts, bytes: r.bytes,
			page_ms_p50: round(r.page_ms_p50), page_ms_max: round(r.page_ms_max),
			client_sign_ms: round(r.client_sign_ms),
			floor_s: round(floor.seconds, 4), ratio: round(ratio, 2),
			target: 'at most 0.5 s in all and at most 2x the floor',
			ok: r.ok === true, pass: r.ok === true && r.seconds <= 0.5 && ratio <= 2,
			errors: r.errors,
		};
	});
	const needCursor = async () => {
		if (!haveCursor) {
			const r = await bench('incr-initial', [...at(node0), '--manifest', manifest,
				'--cursor-out', cursor0, '--limit', '100', '--runs', '1']);
			haveCursor = r.ok === true;
		}
	};

	// incremental_nochange
	await scenario('incremental_nochange', nodes, async () => {
		await needCursor();
		const r = await bench('incr-nochange', [...at(node0), '--cursor-file', cursor0,
			'--reads', String(P.reads)]);
		return {
			reads: r.reads, median_ms: round(r.median_ms), p90_ms: round(r.p90_ms),
			p99_ms: round(r.p99_ms), max_ms: round(r.max_ms),
			floor: 'GET /healthz on the same connection',
			floor_median_ms: round(r.floor_healthz_median_ms),
			ratio: round(r.median_ms / r.floor_healthz_median_ms, 2),
			wrong_answers: r.wrong_answers, first_wrong: r.first_wrong || undefined,
			target: 'median at most 1 ms, p99 at most 3 ms',
			ok: r.ok === true, pass: r.ok === true && r.median_ms <= 1 && r.p99_ms <= 3,
		};
	});

	// sync_snapshot: the small set and every artifact, each with its floor
	await scenario('sync_snapshot', nodes, async () => {
		const small = await bench('sync-snapshot', [...at(node0), '--manifest', manifest,
			'--channels', String(keys.small_channels), '--runs', String(P.runs)]);
		const all = await bench('sync-snapshot', [...at(node0), '--manifest', manifest,
			'--channels', String(keys.art_channels), '--runs', String(P.runs)]);
		const fSmall = await bench('floor-copy', ['--db', dbUrl, '--channels', String(keys.small_channels), '--runs', String(P.runs)]);
		const fAll = await bench('floor-copy', ['--db', dbUrl, '--channels', String(keys.art_channels), '--runs', String(P.runs)]);
		const ok = small.ok === true && all.ok === true;
		const part = (r, f) => ({
			events: r.events, expected_events: r.expected_events, channels: r.channels,
			seconds: round(r.seconds, 4), runs: r.runs?.map((x) => round(x, 4)), bytes: r.bytes,
			floor_s: round(f.seconds, 4),
			ratio: r.seconds && f.seconds ? round(r.seconds / f.seconds, 2) : null,
			errors: r.errors?.length ? r.errors : undefined,
		});
		return {
			small: part(small, fSmall), all: part(all, fAll),
			max_events_node0: Math.max(4096, keys.artifacts + 1000),
			floor: 'one COPY of the same rows ordered by d',
			target: `${BENCHMARK.smallSync} within 50 ms; ${BENCHMARK.allSync} within 100 ms`,
			ok,
			pass: ok && small.seconds <= 0.05 && all.seconds <= 0.1,
		};
	});

	// req_read: one plain REQ for every chat message
	await scenario('req_read', nodes, async () => {
		const r = await bench('req-read', [...at(node0), '--runs', String(P.runs)]);
		return {
			events: r.events, expected_events: r.expected_events,
			first_event_ms: round(r.first_event_ms, 2), eose_ms: round(r.eose_ms, 2),
			runs_first_event_ms: r.runs_first_event_ms?.map((x) => round(x, 2)),
			runs_eose_ms: r.runs_eose_ms?.map((x) => round(x, 2)),
			filter: `{"kinds":[9],"#h":[chat channel],"limit":${keys.chats}} on node 0 (max_limit raised)`,
			node0_warm: node0.warm,
			note: 'node 0 warmed its revision cache when it started, before the first scenario ' +
				'(node0_warm: the newest stored events, the chat messages among them, and their ' +
				'pages in PostgreSQL\'s shared buffers); the first run pays the cold path only ' +
				'without it (COMB_REVISION_CACHE_WARM_MB=0)',
			target: 'first EVENT within 5 ms, EOSE within 150 ms (medians)',
			ok: r.ok === true,
			pass: r.ok === true && r.first_event_ms <= 5 && r.eose_ms <= 150,
			errors: r.errors?.length ? r.errors : undefined,
		};
	});

	// req_burst: many connections, one small plain REQ each at once
	await scenario('req_burst', nodes, async () => {
		const r = await bench('req-burst', [...overNodes, '--conns', String(P.burst)]);
		return {
			connections: r.connections, nodes: r.nodes, authenticated: r.authenticated,
			eose: r.eose, refused: r.refused, wrong_answers: r.wrong_answers,
			all_eose_ms: round(r.all_eose_ms, 2), eose_p50_ms: round(r.eose_p50_ms, 2),
			eose_p99_ms: round(r.eose_p99_ms, 2), first_refusal: r.first_refusal || undefined,
			filter: '{"kinds":[9],"#h":[chat channel],"limit":10}',
			target: 'every EOSE within 300 ms of the first REQ, no refusal',
			ok: r.ok === true,
			pass: r.ok === true && r.refused === 0 && r.all_eose_ms <= 300,
			errors: r.errors?.length ? r.errors : undefined,
		};
	});

	// plans of the read queries, captured with auto_explain
	if (P.explain && !only) {
		await needCursor();
		fs.writeFileSync(path.join(outDir, 'explain-plans.txt'),
			`EXPLAIN (ANALYZE, BUFFERS) of the relay's statements, re-run by run.mjs with the\n` +
			`parameters the relay sent (${new Date().toISOString()}, ${mode} scale)\n\n`);
		await explainOn();
		const f1 = logSize();
		await bench('incr-initial', [...at(node0), '--manifest', manifest, '--cursor-out', cursorX,
			'--limit', '100', '--runs', '1']);
		savePlans('incremental-initial', f1);
		const f2 = logSize();
		await bench('incr-nochange', [...at(node0), '--cursor-file', cursor0, '--reads', '3']);
		savePlans('incremental-nochange', f2);
		const f3 = logSize();
		await bench('sync-snapshot', [...at(node0), '--manifest', manifest,
			'--channels', String(keys.small_channels), '--runs', '1']);
		savePlans('sync-snapshot', f3);
		await explainOff();
		// The first page runs in comb_heads_page: its own plan is the
		// nested one auto_explain logged (explain-incremental-initial.txt).
		await explainStatement('incremental first read: the first page (comb_heads_page)', f1,
			'comb_heads_page($1');
		// A read that finds nothing new stops at its probe: the change
		// query does not run.
		await explainStatement('incremental read with no change: the probe, comb_incremental_unchanged', f2,
			'comb_incremental_unchanged($1');
		await explainStatement(`sync snapshot of ${keys.small_artifacts} artifacts`, f3, 'ORDER BY h.d');
	}

	// incremental_delta
	let deltaWritten = false;
	await scenario('incremental_delta', nodes, async () => {
		await needCursor();
		const r = await bench('incr-delta', [...at(node0), '--manifest', manifest,
			'--cursor-file', cursor0, '--db', dbUrl, '--policy', policyPlugin]);
		deltaWritten = true;
		const f = r.floor;
		return {
			seconds: round(r.seconds, 4), ms: round(r.seconds * 1e3, 2), pages: r.pages,
			floor: 'after the read, on a new libpq connection: the change query from before the writes' +
				' (comb_incremental_changes, the reader\'s keys) and the bytes of the revisions it names' +
				' (one SELECT by seq); median of 3, the first run beside it',
			floor_ms: f ? round(f.seconds * 1e3, 2) : null,
			floor_first_ms: f ? round(f.first_s * 1e3, 2) : null,
			floor_change_query_ms: f ? round(f.change_query_s * 1e3, 2) : null,
			floor_bytes_query_ms: f ? round(f.bytes_query_s * 1e3, 2) : null,
			floor_runs_ms: f?.runs?.map((x) => round(x * 1e3, 2)),
			floor_rows: f?.rows, floor_revisions: f?.revisions, floor_bytes: f?.bytes,
			ratio: f?.seconds ? round(r.seconds / f.seconds, 2) : null,
			items: r.items, expected_items: r.expected_items, missing: r.missing,
			edits: r.edits, moves: r.moves, deletes: r.deletes,
			grant_artifacts: r.grant_artifacts, revoked_artifacts: 64,
			writes: r.writes, refused_writes: r.refused_writes, writes_s: round(r.writes_s, 2),
			target: 'every expected item; at most 20 ms and within 2x the floor',
			ok: r.ok === true,
			pass: r.ok === true && r.seconds <= 0.02 && f?.seconds > 0 && r.seconds <= 2 * f.seconds,
			errors: r.errors?.length ? r.errors : undefined,
		};
	});
	if (P.explain && !only) {
		await explainOn();
		const from = logSize();
		await bench('incr-read', [...at(node0), '--cursor-file', cursor0, '--limit', '1000']);
		savePlans('incremental-delta', from);
		await explainOff();
		await explainStatement('incremental catch-up read after the delta: comb_incremental_changes',
			from, 'comb_incremental_changes(');
	}

	// resume_catchup: right after incremental_delta, the client that
	// missed its writes resumes from the cursor it held before them
	await scenario('resume_catchup', nodes, async () => {
		if (!deltaWritten) {
			await needCursor();
			await bench('incr-delta', [...at(node0), '--manifest', manifest, '--cursor-file', cursor0]);
			deltaWritten = true;
		}
		const r = await bench('resume-catchup', [...at(node0), '--cursor-file', cursor0,
			'--runs', String(P.runs)]);
		return {
			seconds: round(r.seconds, 4), ms: round(r.seconds * 1e3, 2),
			runs: r.runs?.map((x) => round(x, 4)),
			items: r.items, http_items: r.http_items, artifacts: r.artifacts,
			frames: r.frames, http_pages: r.http_pages,
			floor: 'the same catch-up over HTTP (POST /query, limit 1000) in the same run',
			floor_s: round(r.floor_http_s, 4), floor_runs: r.floor_runs?.map((x) => round(x, 4)),
			ratio: round(r.ratio, 2),
			target: 'within 2x of the floor',
			ok: r.ok === true, pass: r.ok === true && r.ratio <= 2,
			errors: r.errors?.length ? r.errors : undefined,
		};
	});

	// incremental_visibility: after incremental_delta, whose catch-up
	// from the first read's cursor must not see the channels it creates
	await scenario('incremental_visibility', nodes, async () => {
		const args = [...overNodes, '--writes', String(P.visWrites)];
		const quiet = await bench('incr-visibility', args);
		const busy = await bench('incr-visibility', [...args, '--ingest-conns', '2']);
		const part = (r) => ({
			writes: r.writes, visible: r.visible, reads: r.reads,
			p50_ms: round(r.p50_ms), p90_ms: round(r.p90_ms), p99_ms: round(r.p99_ms),
			max_ms: round(r.max_ms), ingest_conns: r.ingest_conns, ingested: r.ingested,
			error: r.error || undefined,
		});
		const ok = quiet.ok === true && busy.ok === true;
		return {
			quiet: part(quiet), with_ingest: part(busy),
			figure: 'writer OK on node 0 -> first incremental read on node 1 holding the write (reads in a tight loop)',
			target: 'p99 at most 10 ms without concurrent ingest',
			ok, pass: ok && quiet.p99_ms <= 10,
		};
	});

	// The floor of the live-latency scenarios, measured once after the
	// first: as many loopback TCP readers as subscribers, each written the
	// bytes of one of that scenario's live frames (as measured on the
	// wire; the command's default of about one frame when the scenario
	// delivered none) by one thread per node, no relay in between.
	// liveFigures(r) reports it with what every live-latency driver
	// (bench_live.c) measured.
	let liveFloor = null;
	const liveFigures = async (r) => {
		liveFloor ??= await bench('fanout-floor', ['--conns', String(P.liveSubs),
			'--writers', String(nodes.length), '--rounds', String(P.liveEdits),
			...(r.frame_bytes ? ['--bytes', String(r.frame_bytes)] : [])]);
		return {
			floor: `fanout-floor: ${P.liveSubs} loopback TCP readers in one epoll loop, ${liveFloor.bytes} ` +
				`bytes (one live frame of the first live scenario) written to each by ${nodes.length} ` +
				'threads, no relay',
			frame_bytes: r.frame_bytes,
			floor_p50_ms: round(liveFloor.p50_ms), floor_p99_ms: round(liveFloor.p99_ms),
			ratio_p50: liveFloor.p50_ms ? round(r.p50_ms / liveFloor.p50_ms, 2) : null,
			subscribers: r.subscribers, nodes: r.nodes, edits: r.edits,
			edits_delivered: r.edits_completed,
			p50_ms: round(r.p50_ms), p99_ms: round(r.p99_ms), max_ms: round(r.max_ms),
			min_ms: round(r.min_ms), per_node: r.per_node, setup_s: round(r.setup_s, 2),
			errors: r.errors?.length ? r.errors : undefined,
		};
	};

	// sync_live_latency
	await scenario('sync_live_latency', nodes, async () => {
		const r = await bench('sync-live', [...overNodes, '--manifest', manifest,
			'--subs', String(P.liveSubs), '--edits', String(P.liveEdits)]);
		const figures = await liveFigures(r);
		return {
			...figures,
			snapshot_events: r.snapshot_events, frames_before_ok: r.frames_before_ok,
			from_send_p50_ms: round(r.from_send_p50_ms), from_send_p99_ms: round(r.from_send_p99_ms),
			target: 'p50 at most 1.2x the fan-out floor of the same run, p99 at most 25 ms',
			ok: r.ok === true,
			pass: r.ok === true && figures.ratio_p50 !== null && figures.ratio_p50 <= 1.2 &&
				r.p99_ms <= 25,
		};
	});

	// resume_live_latency: after sync_live_latency, whose edits name the
	// loaded revisions (this one takes the current ones from its catch-up)
	await scenario('resume_live_latency', nodes, async () => {
		const r = await bench('resume-live', [...overNodes, '--subs', String(P.liveSubs),
			'--edits', String(P.liveEdits)]);
		return {
			...await liveFigures(r),
			first_catchup_items: r.first_catchup_items, unexpected_frames: r.unexpected_frames,
			figure: 'writer OK -> the CHANGES frame carrying the edit, per subscriber and edit',
			target: 'p50 at most 10 ms, p99 at most 50 ms',
			ok: r.ok === true,
			pass: r.ok === true && r.p50_ms <= 10 && r.p99_ms <= 50,
		};
	});

	// resume_reconnect: every client with a current cursor at once
	await scenario('resume_reconnect', nodes, async () => {
		const r = await bench('resume-reconnect', [...overNodes, '--clients', String(P.reconnects),
			'--db', dbUrl]);
		return {
			clients: r.clients, nodes: r.nodes, scopes: r.scopes, eose: r.eose,
			refused: r.refused, wrong: r.wrong,
			all_eose_s: round(r.all_eose_s, 3),
			req_to_eose_p50_ms: round(r.req_to_eose_p50_ms, 2),
			req_to_eose_p99_ms: round(r.req_to_eose_p99_ms, 2),
			db_ms: round(r.db_ms, 1), db_calls: r.db_calls,
			db_note: 'pg_stat_statements reset just before the reconnect; pg_top_statements cover the reconnect only',
			target: 'every EOSE within 2 s of the first connection (for 1,000 clients)',
			ok: r.ok === true,
			pass: r.ok === true && r.all_eose_s < 2,
			errors: r.errors?.length ? r.errors : undefined,
		};
	});

	// ingest, with its plain INSERT floor, and chat_ingest: the same
	// connections and window with kind-9 chat messages, against the same
	// floor
	const ingestFloor = (rows = 'event') => bench('insert-floor', ['--db', dbUrl, '--events',
		String(keys.artifacts), '--conns', '4', '--batch', '64', '--rows', rows]);
	// One run of a floor (rows as insert-floor's --rows) with PostgreSQL's
	// cost per row of its statements (those matching `match`).
	const floorRun = async (rows, match) => {
		await pgReset();
		const w0 = await pgMark();
		const run = await ingestFloor(rows);
		const w1 = await pgMark();
		const cost = await pgCost(`query ILIKE '${match}'`);
		return { run, pg: perUnit(cost, w0, w1, run.stored > 0 ? run.stored : 0) };
	};
	// The faster of two runs in a row: a floor is what the machine can do
	// at best, and now and then one run of the same rows comes out twice
	// as slow, with twice PostgreSQL's CPU (2026-12-05).
	const bestFloor = async (rows, match) => {
		const a = await floorRun(rows, match), b = await floorRun(rows, match);
		return { ...(b.run.seconds < a.run.seconds ? b : a),
			runs_per_s: [a, b].map((x) => round(x.run.events_per_s, 0)) };
	};
	// PostgreSQL's share, with pg_stat_statements.track 'all': the floor's
	// INSERTs per row, and every statement of the relays and the capture
	// (not the client's count afterwards) per event stored, with the
	// nested statements that cost the most (pg-NAME-nested.txt). With
	// rowsFloor, also the floor of an artifact create's storage: the same
	// events with their revision and head rows, bare INSERTs into copies
	// of the three tables (insert-floor --rows artifact), per create, and
	// what the relay must spend on each event before storing it (its own
	// parse and signature check on one thread, verify-floor): the floor
	// with those checks spread over the machine's two cores is
	// floor_s + verify_s / 2. Over floor_s, that is the lowest ratio any
	// relay that checks every event could reach (its storage a bare row,
	// nothing else done); with the artifact rows' floor instead of the
	// bare row's, the lowest the rows stored today allow.
	const ingestScenario = (name, command, floor, target, pass, rowsFloor = false) => scenario(name, nodes, async () => {
		await trackAll(true);
		const { run: f, pg: pgRow, runs_per_s: floorRuns } =
			await bestFloor('event', 'INSERT INTO bench_ingest_floor%');
		let pgRows = null, rf = null;
		if (rowsFloor) {
			const best = await bestFloor('artifact', 'WITH v (community_id%');
			rf = best.run;
			pgRows = best.pg;
			if (pgRows) {
				pgRows.events_per_s = round(rf.events_per_s, 0);
				pgRows.runs_events_per_s = best.runs_per_s;
			}
		}
		const v = rowsFloor ? await bench('verify-floor', ['--events', String(keys.artifacts)]) : null;
		await pgReset();
		const w0 = await pgMark();
		const r = await bench(command, [...at(node0), '--db', dbUrl, '--events',
			String(keys.artifacts), '--conns', '4', '--window', '64']);
		const w1 = await pgMark();
		const cost = await pgCost("toplevel AND query NOT ILIKE '%pg_stat%'" +
			" AND query NOT ILIKE 'SELECT count(*) FROM %' AND query NOT ILIKE 'ALTER SYSTEM%'" +
			" AND query NOT ILIKE '%pg_reload_conf%'");
		const nested = await pgNested(r.stored > 0 ? r.stored : 1);
		await trackAll(false);
		fs.writeFileSync(path.join(outDir, `pg-${name}-nested.txt`), nested.map((q) =>
			`${q.us_per_event} us, ${q.wal_records_per_event} WAL records, ${q.wal_bytes_per_event} WAL bytes per event (calls ${q.calls})\n  ${q.query}`).join('\n\n') + '\n');
		const pgEvent = perUnit(cost, w0, w1, r.stored > 0 ? r.stored : 0);
		const ratio = r.events_per_s && f.events_per_s ? f.events_per_s / r.events_per_s : null;
		return {
			pg_per_event: pgEvent, pg_per_floor_row: pgRow,
			pg_time_ratio: pgEvent && pgRow?.pg_us ? round(pgEvent.pg_us / pgRow.pg_us, 2) : null,
			pg_cpu_ratio: pgEvent?.pg_cpu_us && pgRow?.pg_cpu_us ? round(pgEvent.pg_cpu_us / pgRow.pg_cpu_us, 2) : null,
			wal_records_ratio: pgEvent && pgRow?.wal_records
				? round(pgEvent.wal_records / pgRow.wal_records, 2) : null,
			pg_per_artifact_rows_floor: pgRows ?? undefined,
			pg_time_ratio_to_rows_floor: pgEvent && pgRows?.pg_us ? round(pgEvent.pg_us / pgRows.pg_us, 2) : undefined,
			pg_cpu_ratio_to_rows_floor: pgEvent?.pg_cpu_us && pgRows?.pg_cpu_us
				? round(pgEvent.pg_cpu_us / pgRows.pg_cpu_us, 2) : undefined,
			wal_records_ratio_to_rows_floor: pgEvent && pgRows?.wal_records
				? round(pgEvent.wal_records / pgRows.wal_records, 2) : undefined,
			pg_nested_top: nested.slice(0, 6),
			events: r.events, acknowledged: r.acknowledged, refused: r.refused, stored: r.stored,
			seconds: round(r.seconds, 3), events_per_s: round(r.events_per_s, 0),
			ok_latency_p50_ms: round(r.ok_latency_p50_ms, 2),
			ok_latency_p99_ms: round(r.ok_latency_p99_ms, 2),
			floor, floor_events_per_s: round(f.events_per_s, 0), floor_s: round(f.seconds, 3),
			floor_runs_events_per_s: floorRuns,
			ratio: round(ratio, 2),
			verify_floor_us_per_event: v ? round(v.us_per_event, 1) : undefined,
			verify_floor_s: v ? round(v.seconds, 3) : undefined,
			ratio_to_floor_with_checks: v && r.seconds ? round(r.seconds / (f.seconds + v.seconds / 2), 2) : undefined,
			lowest_ratio_with_checks: v && f.seconds ? round((f.seconds + v.seconds / 2) / f.seconds, 2) : undefined,
			lowest_ratio_with_checks_and_rows: v && rf?.seconds && f.seconds
				? round((rf.seconds + v.seconds / 2) / f.seconds, 2) : undefined,
			first_refusal: r.first_refusal || undefined,
			target,
			ok: r.ok === true && f.ok === true,
			pass: r.ok === true && pass(r.events_per_s, ratio,
				pgEvent && pgRow?.pg_us ? pgEvent.pg_us / pgRow.pg_us : null,
				pgEvent && pgRow?.wal_records ? pgEvent.wal_records / pgRow.wal_records : null),
		};
	});
	await ingestScenario('ingest', 'ingest',
		'plain multi-row INSERT of the same events (64 rows per statement, 4 connections)',
		'at least 5,000 events/s and within 1.5x of the floor; PostgreSQL time per create within 1.5x' +
		' a floor row\'s, WAL records per create within 2x',
		(perS, ratio, pgRatio, walRatio) => perS >= 5000 && ratio <= 1.5 &&
			pgRatio !== null && pgRatio <= 1.5 && walRatio !== null && walRatio <= 2, true);
	await ingestScenario('chat_ingest', 'chat-ingest',
		'the ingest floor: plain multi-row INSERT of artifact creates of the same size (64 rows per statement, 4 connections)',
		'at least 5,000 events/s',
		(perS) => perS >= 5000);

	// req_live_latency: as sync_live_latency, for plain REQs of one
	// channel's revisions (kinds [45010], #h): the live delivery thread, the hub's
	// candidates and one access probe per write, instead of a sync's turn.
	// Each write creates an artifact in the ingest channel, which no
	// scenario counts after the ingest ones
	await scenario('req_live_latency', nodes, async () => {
		const r = await bench('req-live', [...overNodes, '--manifest', manifest,
			'--subs', String(P.liveSubs), '--edits', String(P.liveEdits)]);
		return {
			...await liveFigures(r),
			frames_before_ok: r.frames_before_ok,
			figure: 'writer OK -> the EVENT frame of the write, per plain REQ subscriber and write',
			target: 'none of its own (BENCHMARKS.md sets none): every subscriber receives every write once, in order',
			ok: r.ok === true,
			pass: r.ok === true,
		};
	});

	// connections: a node of its own, sized for them
	await stopService(node1.svc);
	const threads = Math.ceil((P.conns + 64) * 8 / 7) + 16;
	const node2 = await startRelay(2, { COMB_NUM_THREADS: String(threads) });
	await sleep(500);
	await scenario('connections', [node2], async () => {
		const r = await bench('conns', [...at(node2), '--pid', String(node2.pid),
			'--count', String(P.conns), '--hold', String(P.hold), '--settle', String(P.settle)]);
		return {
			target_connections: r.target, authenticated: r.authenticated, dropped: r.dropped,
			first_error: r.first_error || undefined, connect_s: round(r.connect_s, 2),
			kib_per_conn: round(r.kib_per_conn, 1),
			kib_per_conn_while_connecting: round(r.kib_per_conn_connected, 1),
			kib_per_conn_whole_process: round(r.kib_per_conn_whole_process, 1),
			rss_before_kib: r.rss_before_kib, rss_connected_kib: r.rss_connected_kib,
			rss_settled_kib: r.rss_settled_kib,
			relay_threads: { before: r.threads_before, connected: r.threads_connected, settled: r.threads_settled },
			num_threads: threads, ulimit_nofile: Number((await runCapture('bash', ['-c', 'ulimit -n'], { echo: false })).stdout.trim()),
			probes_answered: `${r.probes_answered}/${r.probes}`,
			target: 'at least 5,000 connections, at most 100 KiB each',
			ok: r.ok === true,
			pass: r.ok === true && r.authenticated >= 5000 && r.kib_per_conn <= 100,
		};
	});

	// standby_reads (issue 37): the HTTP read mix and req_read's plain REQ
	// read through a node whose reads go to a streaming standby, against
	// the same reads through a node reading the primary, in the same run
	await scenario('standby_reads', nodes, async () => {
		if (!deltaWritten) {
			await needCursor();
			await bench('incr-delta', [...at(node0), '--manifest', manifest, '--cursor-file', cursor0]);
			deltaWritten = true;
		}
		return standbyReads(node0, manifest, cursor0);
	});

	for (const s of services)
		await stopService(s);
	const crashed = services.filter((s) => s.exited && s.exited.code !== 0 && s.exited.sig !== 'SIGTERM');
	for (const s of crashed)
		log(`${s.name} exited with ${JSON.stringify(s.exited)}; see ${s.file}`);
	const wrong = results.filter((r) => !r.ok).map((r) => r.scenario);
	// a missed ingest shows its ratio beside the lowest the run's floors allow
	const missed = results.filter((r) => !r.pass).map((r) => r.lowest_ratio_with_checks_and_rows
		? `${r.scenario} (${r.ratio}x; the lowest its rows and checks allow here: ${r.lowest_ratio_with_checks_and_rows}x)`
		: r.scenario);
	log(`done in ${((Date.now() - started) / 1000).toFixed(1)} s: ${results.length} scenarios, ` +
		`${wrong.length ? `WRONG or failed: ${wrong.join(', ')}` : 'all read correctly'}; ` +
		`${missed.length ? `targets missed: ${missed.join(', ')}` : 'all targets met'}`);
	fs.writeFileSync(path.join(outDir, `results-${mode}.jsonl`),
		results.map((r) => JSON.stringify(r)).join('\n') + '\n');
	if (wrong.length || crashed.length)
		return 1;
	if (!quick && env.BENCH_ENFORCE === '1' && missed.length)
		return 1;
	return 0;
}

const BENCHMARK = { smallSync: '4,096', allSync: '10,050' };

// psql on database db of the server on port; resolves to its output.
async function psqlAt(port, sql, db = dbName) {
	const r = await runCapture('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
		'-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', db, '-F', '\t', '-c', sql],
	{ echo: false });
	if (r.code !== 0)
		throw new Error(`psql on port ${port} failed: ${r.stderr}\n${sql}`);
	return r.stdout.replace(/\n$/, '');
}

// What the server on port ran for comb_bench since its statistics were
// reset: the read router's position samples apart from everything else.
async function statementsAt(port) {
	const rows = await psqlAt(port,
		"SELECT query LIKE 'SELECT (CASE WHEN pg_is_in_recovery()%', sum(calls), " +
		'round(sum(total_exec_time)::numeric, 2) FROM pg_stat_statements ' +
		'WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ' +
		"AND query NOT ILIKE '%pg_stat_statements%' GROUP BY 1");
	const out = { calls: 0, exec_ms: 0, sample_calls: 0, sample_exec_ms: 0 };
	for (const line of rows ? rows.split('\n') : []) {
		const [sample, calls, ms] = line.split('\t');
		if (sample === 't') {
			out.sample_calls += Number(calls);
			out.sample_exec_ms += Number(ms);
		} else {
			out.calls += Number(calls);
			out.exec_ms += Number(ms);
		}
	}
	return out;
}

// The statements (with their calls) the server on port ran for
// comb_bench since its statistics were reset, most called first, to a
// file beside the results.
async function saveStatementsAt(port, file) {
	const rows = await psqlAt(port,
		'SELECT calls, round(total_exec_time::numeric, 2), ' +
		"regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements " +
		'WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ' +
		"AND query NOT ILIKE '%pg_stat_statements%' ORDER BY calls DESC, total_exec_time DESC");
	fs.writeFileSync(path.join(outDir, file), (rows ? rows.split('\n') : []).map((line) => {
		const [calls, ms, query] = line.split('\t');
		return `calls ${calls}  total ${ms} ms\n  ${query}`;
	}).join('\n\n') + '\n');
}

// The statements and execution time of b less those of a (statementsAt).
function statementsSince(a, b) {
	const out = {};
	for (const k of Object.keys(b))
		out[k] = b[k] - a[k];
	return out;
}

// The standby_reads scenario: a streaming standby of the bench primary
// (scripts/standby.sh, pg_basebackup -R: the primary's settings with it),
// relay node 2 reading from it, then the same reads through node 0 (the
// primary) and node 2: incremental reads with no change (incr-nochange,
// from a cursor at the head), the catch-up read after incremental_delta
// (incr-read from the first read's cursor) and req_read's plain REQ of
// every chat message (req-read, on a new connection each run). The
// statements each server ran come from its own pg_stat_statements; those
// of the REQs are also counted apart (before and after them), and so are
// those of each node's first, untimed REQ (node 2's warm at start read
// the newest stored events, by then the ingest scenarios' and not the
// fixture's chat messages: it reads their bytes where the REQ reads).
async function standbyReads(node0, manifest, cursor0) {
	const script = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..',
		'scripts', 'standby.sh');
	const dir = path.join(env.BENCH_STACK ?? outDir, 'standby');
	const head = path.join(outDir, 'cursor-standby.txt');
	await runCapture('bash', [script, 'remove', dir], { echo: false });
	const started = await runCapture('bash', [script, 'start', dir, pgPort, '1'], { echo: false });
	if (started.code !== 0)
		throw new Error(`scripts/standby.sh start failed: ${started.stderr}`);
	const sport = started.stdout.trim().split('\n').pop();
	let node2 = null;
	try {
		const target = await psql('SELECT pg_current_wal_insert_lsn()');
		for (let i = 0; ; i++) {
			if (await psqlAt(sport, `SELECT pg_last_wal_replay_lsn() >= '${target}'`) === 't')
				break;
			if (i > 1200)
				throw new Error('the standby did not catch up within 120 s');
			await sleep(100);
		}
		// max_limit raised as on node 0, for req_read's REQ
		node2 = await startRelay(2, {
			COMB_READ_DATABASE_URLS: `postgresql://postgres@127.0.0.1:${sport}/${dbName}`,
			COMB_MAX_LIMIT: String(Math.max(1000, state.keys.chats)),
		});
		const metrics = () => new Promise((resolve) => {
			http.get({ host: '127.0.0.1', port: node2.port, path: '/metrics' }, (res) => {
				let body = '';
				res.on('data', (c) => { body += c; });
				res.on('end', () => resolve(body));
			}).on('error', () => resolve(''));
		});
		for (let i = 0; !/^comb_read_standby_in_rotation\{[^}]*\} 1$/m.test(await metrics()); i++) {
			if (i > 300)
				throw new Error('the standby did not enter the rotation within 30 s');
			await sleep(100);
		}
		// a cursor at the head (the catch-up's last): nothing changes
		// while the reads run
		const first = await bench('incr-read', ['--addr', node0.addr, '--host', node0.host,
			'--cursor-file', cursor0, '--cursor-out', head, '--limit', '1000']);
		if (first.ok !== true)
			throw new Error('the catch-up read for the head cursor failed');
		const reset = async () => {
			await psql('SELECT pg_stat_statements_reset()');
			await psqlAt(sport, 'SELECT pg_stat_statements_reset()');
		};
		const both = async () => ({ primary: await statementsAt(pgPort), standby: await statementsAt(sport) });
		const mix = async (node, half) => {
			const at = ['--addr', node.addr, '--host', node.host];
			// untimed, its statements counted: the node's first REQ of
			// the chat messages (node 2's revision cache does not hold
			// them: its warm read newer events; node 0's does when
			// req_read ran before)
			await reset();
			const reqFirst = await bench('req-read', [...at, '--runs', '1']);
			const first = await both();
			// untimed: the node's revision cache and its server's buffers
			// hold what the catch-up reads, as they do for node 0
			await bench('incr-read', [...at, '--cursor-file', cursor0, '--limit', '1000']);
			await reset();
			const cpu0 = procCpuSeconds(node.pid);
			const nochange = await bench('incr-nochange', [...at, '--cursor-file', head,
				'--reads', String(P.reads)]);
			const catchUp = [];
			for (let i = 0; i < P.runs; i++)
				catchUp.push(await bench('incr-read', [...at, '--cursor-file', cursor0, '--limit', '1000']));
			const cpu1 = procCpuSeconds(node.pid);
			const beforeReq = await both();
			const req = await bench('req-read', [...at, '--runs', String(P.runs)]);
			const cpu = procCpuSeconds(node.pid) - cpu0;
			const after = await both();
			await saveStatementsAt(pgPort, `pg-standby_reads-${half}-primary.txt`);
			await saveStatementsAt(sport, `pg-standby_reads-${half}-standby.txt`);
			const secs = catchUp.map((r) => r.seconds).sort((a, b) => a - b);
			return {
				nochange, catchUp, req, relay_cpu_s: round(cpu, 2),
				req_relay_cpu_s: round(cpu0 + cpu - cpu1, 2),
				catchup_s: secs[Math.floor(secs.length / 2)],
				items: catchUp[0]?.items,
				...after,
				req_statements: {
					primary: statementsSince(beforeReq.primary, after.primary),
					standby: statementsSince(beforeReq.standby, after.standby),
				},
				req_first: { r: reqFirst, ...first },
				ok: nochange.ok === true && nochange.wrong_answers === 0 &&
					catchUp.every((r) => r.ok === true && r.items === catchUp[0].items) &&
					[reqFirst, req].every((r) => r.ok === true && r.events === r.expected_events),
			};
		};
		const onPrimary = await mix(node0, 'primary');
		const onStandby = await mix(node2, 'standby');
		const text = await metrics();
		const writes = await standbyWrites(node0, node2);
		const metric = (re) => Number(text.match(re)?.[1] ?? NaN);
		const routed = {
			standby: metric(/^comb_read_standby_reads_total\{[^}]*\} (\d+)$/m),
			primary: metric(/^comb_read_primary_total (\d+)$/m),
			waits: metric(/^comb_read_waits_total (\d+)$/m),
			fallbacks: metric(/^comb_read_fallbacks_total (\d+)$/m),
		};
		const reads = onStandby.primary.calls + onStandby.standby.calls;
		const offPrimary = reads ? onStandby.standby.calls / reads : null;
		const execOff = onStandby.primary.exec_ms + onStandby.standby.exec_ms ?
			onStandby.standby.exec_ms / (onStandby.primary.exec_ms + onStandby.standby.exec_ms) : null;
		const ratioNochange = onStandby.nochange.median_ms / onPrimary.nochange.median_ms;
		const ratioCatchUp = onStandby.catchup_s / onPrimary.catchup_s;
		const ratioReq = onStandby.req.eose_ms / onPrimary.req.eose_ms;
		const ratioReqFirst = onStandby.req.first_event_ms / onPrimary.req.first_event_ms;
		const rs = onStandby.req_statements;
		const reqReads = rs.primary.calls + rs.standby.calls;
		const statements = (m) => ({
			primary_statements: m.primary.calls, primary_exec_ms: round(m.primary.exec_ms, 2),
			standby_statements: m.standby.calls, standby_exec_ms: round(m.standby.exec_ms, 2),
			position_samples: { primary: m.primary.sample_calls, standby: m.standby.sample_calls },
		});
		const part = (m) => ({
			nochange_median_ms: round(m.nochange.median_ms), nochange_p99_ms: round(m.nochange.p99_ms),
			catchup_ms: round(m.catchup_s * 1e3, 2), catchup_items: m.items,
			relay_cpu_s: m.relay_cpu_s,
			primary_statements: m.primary.calls, primary_exec_ms: round(m.primary.exec_ms, 2),
			standby_statements: m.standby.calls, standby_exec_ms: round(m.standby.exec_ms, 2),
			position_samples: { primary: m.primary.sample_calls, standby: m.standby.sample_calls },
			req_read_events: m.req.events, req_read_expected_events: m.req.expected_events,
			req_read_first_event_ms: round(m.req.first_event_ms, 2),
			req_read_eose_ms: round(m.req.eose_ms, 2),
			req_read_runs_eose_ms: m.req.runs_eose_ms?.map((x) => round(x, 2)),
			req_read_relay_cpu_s: m.req_relay_cpu_s,
			req_read_statements: statements(m.req_statements),
			req_read_first_untimed: {
				eose_ms: round(m.req_first.r.eose_ms, 2), ok: m.req_first.r.ok === true,
				...statements(m.req_first),
			},
			errors: ((e) => (e.length ? e.slice(0, 10) : undefined))([m.nochange, ...m.catchUp,
				m.req_first.r, m.req].flatMap((r) => r.errors ?? [])),
		});
		return {
			reads_on_primary: part(onPrimary),
			reads_on_standby: part(onStandby),
			node2_routing: routed,
			read_statements_off_primary: round(offPrimary, 4),
			read_exec_time_off_primary: round(execOff, 4),
			latency_ratio_nochange: round(ratioNochange, 2),
			latency_ratio_catchup: round(ratioCatchUp, 2),
			req_read_statements_off_primary: round(reqReads ? rs.standby.calls / reqReads : null, 4),
			latency_ratio_req_read: round(ratioReq, 2),
			latency_ratio_req_read_first_event: round(ratioReqFirst, 2),
			req_read_filter: `{"kinds":[9],"#h":[chat channel],"limit":${state.keys.chats}}, max_limit raised on both nodes`,
			note: 'primary, standby, relays and clients share the machine\'s cores; ' +
				'latency_ratio_req_read is of the EOSE medians; each req-read run makes two statements ' +
				'on the primary (the reader\'s admin status with the WAL position: at AUTH and for the ' +
				'REQ) and two where it reads (the newest events, then the rest); node 2 warmed its ' +
				'revision cache when it started with the newest stored events, newer than the chat ' +
				'messages; the bytes of events not in the node\'s revision cache are read where the ' +
				'REQ reads (req_read_first_untimed); ' +
				'req_read_statements counts whatever ran between the REQs\' start and end',
			...writes,
			target: 'at least 95% of read statements off the primary; latency within 1.5x',
			ok: onPrimary.ok && onStandby.ok && writes.writes_ok,
			pass: onPrimary.ok && onStandby.ok && offPrimary >= 0.95 &&
				ratioNochange <= 1.5 && ratioCatchUp <= 1.5 && ratioReq <= 1.5,
		};
	} finally {
		if (node2)
			await stopService(node2.svc);
		await runCapture('bash', [script, 'remove', dir], { echo: false });
	}
}

// Redis's commands so far (INFO commandstats): calls per command.
async function redisCalls() {
	const r = await runCapture('redis-cli', ['-u', redisUrl, 'INFO', 'commandstats'], { echo: false });
	const out = {};
	for (const m of r.stdout.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
		out[m[1]] = Number(m[2]);
	return r.code === 0 ? out : null;
}

// The write side of read standbys, after standby_reads' reads: the ingest
// scenario's workload (artifact creates, 4 connections, 64 unacknowledged
// each) through node 0 (no standby: no position recorded) and node 2
// (the standby configured: after each committed batch the primary's WAL
// position is read, one statement, and recorded in Redis, one EVALSHA),
// alternating, 5 times each (P.runs in quick mode), each run with
// artifacts of its own.
// Both nodes write to the same primary. Around each run: the Redis
// commands (INFO commandstats, every client's) and the primary's
// position statements (pg_stat_statements).
const POSITION_SQL = 'SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()' +
	' ELSE pg_current_wal_insert_lsn() END)::text';

async function standbyWrites(node0, node2) {
	const runs = { node0: [], node2: [] };
	for (let i = 0; i < (quick ? P.runs : 5); i++) {
		for (const [name, node] of [['node0', node0], ['node2', node2]]) {
			await psql('SELECT pg_stat_statements_reset()');
			const c0 = await redisCalls();
			const r = await bench('ingest', ['--addr', node.addr, '--host', node.host, '--db', dbUrl,
				'--events', String(state.keys.artifacts), '--conns', '4', '--window', '64',
				'--series', `standby-writes-${name}-${i}`]);
			const c1 = await redisCalls();
			const positions = Number(await psql('SELECT coalesce(sum(calls), 0) FROM pg_stat_statements' +
				` WHERE ${ofThisDb} AND query = '${POSITION_SQL.replace(/'/g, "''")}'`));
			const delta = (k) => (c0 && c1 ? (c1[k] ?? 0) - (c0[k] ?? 0) : null);
			const all = c0 && c1 ? Object.keys(c1).reduce((t, k) => t + delta(k), 0) : null;
			const byCommand = {};
			for (const k of Object.keys(c1 ?? {})) {
				if (delta(k) > 1)
					byCommand[k] = delta(k);
			}
			runs[name].push({ r, redis_commands: all, redis_evalsha: delta('evalsha') + delta('eval'),
				redis_by_command: byCommand, position_statements: positions });
		}
	}
	const median = (xs) => {
		const v = xs.filter((x) => typeof x === 'number').sort((a, b) => a - b);
		return v.length ? v[Math.floor(v.length / 2)] : null;
	};
	const side = (rs) => ({
		events_per_s: round(median(rs.map((x) => x.r.events_per_s)), 0),
		runs_events_per_s: rs.map((x) => round(x.r.events_per_s, 0)),
		ok_latency_p50_ms: round(median(rs.map((x) => x.r.ok_latency_p50_ms)), 2),
		ok_latency_p99_ms: round(median(rs.map((x) => x.r.ok_latency_p99_ms)), 2),
		events_per_run: rs[0]?.r.events,
		stored_per_run: rs.map((x) => x.r.stored),
		redis_commands_per_run: rs.map((x) => x.redis_commands),
		redis_evalsha_per_run: rs.map((x) => x.redis_evalsha),
		redis_by_command_first_run: rs[0]?.redis_by_command,
		primary_position_statements_per_run: rs.map((x) => x.position_statements),
		errors: ((e) => (e.length ? e.slice(0, 10) : undefined))(rs.flatMap((x) => [
			...(x.r.errors ?? []), ...(x.r.first_refusal ? [x.r.first_refusal] : [])])),
	});
	const w0 = side(runs.node0);
	const w2 = side(runs.node2);
	const extra = (k) => median(runs.node2.map((x, i) => x[k] - (runs.node0[i]?.[k] ?? 0)));
	const events = state.keys.artifacts;
	const evalsha = median(runs.node2.map((x) => x.redis_evalsha));
	return {
		writes_node0_no_standby: w0,
		writes_node2_with_standby: w2,
		write_ratio_with_standby: w0.events_per_s && w2.events_per_s
			? round(w2.events_per_s / w0.events_per_s, 3) : null,
		position_records_redis_commands: evalsha,
		position_records_per_event: evalsha !== null && events ? round(evalsha / events, 4) : null,
		redis_commands_extra_with_standby: extra('redis_commands'),
		primary_position_statements_extra_with_standby: extra('position_statements'),
		write_note: 'ingest (artifact creates, 4 connections, window 64) alternately through node 0 and ' +
			'node 2, same primary; write_ratio_with_standby is node 2\'s median events/s over node 0\'s; ' +
			'position_records_redis_commands is the median EVALSHA/EVAL count of a node-2 run (the ' +
			'position records: one round trip per committed batch and community), redis_commands counts every ' +
			'Redis client\'s commands during a run, the GET and SET/PEXPIRE inside the script included, ' +
			'and the INFO that reads them; the primary\'s position statements include node 2\'s read ' +
			'router samples (the same SQL), hence the extra over node 0\'s runs',
		writes_ok: [...runs.node0, ...runs.node2].every((x) => x.r.ok === true),
	};
}

main().then((code) => process.exit(code), (err) => {
	log(`failed: ${err.stack || err}`);
	process.exit(1);
});
