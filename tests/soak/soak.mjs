// `make soak` (scripts/soak.sh runs this with a private PostgreSQL and
// Redis named by COMB_TEST_STACK): the long runs of issue 7.
//
//   load     one relay node holding SOAK_SYNCS syncs (default 2000) under
//            a steady write load (SOAK_RATE writes per second, default
//            10) for DURATION seconds: relay RSS over time (no growth
//            after warm-up), p99 delivery latency, errors, and every
//            sync equal to its channel at the end (tests/soak/load.mjs);
//   checker  the convergence checker (tests/e2e/lib/checker.mjs) on two
//            relay nodes with faults at random points (capture and relay
//            nodes killed with SIGKILL, writing transactions held open,
//            PostgreSQL and Redis restarted): SOAK_SEEDS seeds (default
//            5: SEED, SEED + 1, ...) sharing DURATION seconds;
//   histories SOAK_HISTORIES short histories (default 50, each
//            SOAK_HISTORY_OPS operations, default 400) without faults,
//            incremental readers only, the shape of the planted-bug
//            comparison in tests/e2e/convergence.test.mjs.
//
// Environment: SEED (default random; printed, and in every failure),
// DURATION (seconds per part, default 600), SOAK_PARTS (default
// "load,checker"), SOAK_SYNCS, SOAK_RATE, SOAK_SEEDS, SOAK_HISTORIES,
// SOAK_HISTORY_OPS, SOAK_PARALLEL (histories at a time, default 1),
// SOAK_BUSY (busy loops beside the runs, default 0),
// SOAK_REPORT (a JSON file for the full report). Exits 1 when any part
// fails; every seed that did not converge is named.

import { execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

import { buildDir, readStackEnv, sourceDir, stackDir, startRelay } from '../e2e/lib/harness.mjs';
import { runChecker, summarize } from '../e2e/lib/checker.mjs';
import { runLoad } from './load.mjs';

const execFileP = promisify(execFile);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const seed = Number(process.env.SEED || crypto.randomInt(1, 2 ** 31));
const durationMs = Number(process.env.DURATION || 600) * 1000;
const parts = (process.env.SOAK_PARTS || 'load,checker').split(',').map((x) => x.trim()).filter(Boolean);
const nSyncs = Number(process.env.SOAK_SYNCS || 2000);
const rate = Number(process.env.SOAK_RATE || 10);
const checkerSeeds = Number(process.env.SOAK_SEEDS || 5);
const historyCount = Number(process.env.SOAK_HISTORIES || 50);
const historyOps = Number(process.env.SOAK_HISTORY_OPS || 400);
const historyParallel = Number(process.env.SOAK_PARALLEL || 1);
const busyLoops = Number(process.env.SOAK_BUSY || 0);
const reportFile = process.env.SOAK_REPORT || path.join(buildDir, 'soak-report.json');

const log = (line) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

// Restarts of the soak stack's own servers (scripts/servers.sh).
function serverHooks() {
	const env = readStackEnv();
	const servers = (fn, ...args) => execFileP('bash', ['-c',
		`. "${path.join(sourceDir, 'scripts', 'servers.sh')}" && ${fn} "$@"`, 'servers', ...args]);
	const pgDir = fs.realpathSync(path.join(stackDir, 'pg'));
	return {
		async pg(random) {
			await servers('comb_pg_stop', pgDir);
			await sleep(500 + Math.floor(random() * 2500));
			await servers('comb_pg_start', pgDir, env.PGPORT, '0');
		},
		async redis(random) {
			await servers('comb_redis_stop', path.join(stackDir, 'redis'));
			await sleep(500 + Math.floor(random() * 2500));
			await servers('comb_redis_start', path.join(stackDir, 'redis'), env.COMB_TEST_REDIS_PORT, '0',
				env.COMB_TEST_REDIS_DATABASES);
		},
	};
}

async function loadPart() {
	// civetweb keeps an eighth of its threads for plain HTTP
	const threads = Math.ceil((nSyncs + 64) * 8 / 7) + 16;
	const stack = await startRelay({
		nodes: 1,
		env: { COMB_WRITE_RATE: '0', COMB_NUM_THREADS: String(threads), COMB_DB_POOL_SIZE: '16' },
	});
	try {
		log(`load: ${nSyncs} syncs, ${rate} writes/s for ${durationMs / 1000} s (relay num_threads ${threads})`);
		const report = await runLoad(stack, { seed, syncs: nSyncs, rate, durationMs, log });
		const l = report.latency;
		log(`load: ${report.ok ? 'passed' : 'FAILED'}: ${report.syncs.opened} syncs opened in ${report.syncs.openMs} ms, ` +
			`${report.syncs.live} live at the end, ${report.syncs.divergent} divergent; ` +
			`${report.writes.ok} writes (${report.writes.perSecond}/s), ${report.writes.failed} failed; ` +
			`${report.deliveries} deliveries, latency p50 ${l.all.p50} ms, p99 ${l.all.p99} ms, max ${l.all.max} ms ` +
			`(after warm-up p99 ${l.afterWarmup.p99} ms); RSS ${report.rss?.warmupKb} kB after warm-up, ` +
			`${report.rss?.endKb} kB at the end (growth ${report.rss?.growthKb} kB, allowed ${report.rss?.allowedKb}); ` +
			`resyncs ${JSON.stringify(report.resyncs)}, drops ${report.drops}`);
		for (const f of report.failures)
			log(`FAIL load: ${f}`);
		return report;
	} finally {
		await stack.stop();
	}
}

// One seeded history with faults on a fresh two-node stack.
async function checkerRun(runSeed, runMs) {
	const stack = await startRelay({ nodes: 2, env: { COMB_WRITE_RATE: '0' } });
	try {
		log(`checker: seed ${runSeed} for ${runMs / 1000} s with faults`);
		const report = await runChecker(stack, {
			seed: runSeed,
			durationMs: runMs,
			readers: 4,
			channels: 8,
			writeGapMs: 30,
			faults: ['capture', 'node', 'hold', 'pg', 'redis'],
			faultGapMs: [4000, 12000],
			holdMs: runMs >= 300000 ? 30000 : undefined,
			faultHooks: serverHooks(),
			log,
		});
		console.log(summarize(report));
		return report;
	} finally {
		await stack.stop();
	}
}

// One short history without faults, incremental readers only: the shape
// of the planted-bug comparison in tests/e2e/convergence.test.mjs.
async function historyRun(runSeed) {
	const stack = await startRelay({ nodes: 2, env: { COMB_WRITE_RATE: '0' } });
	try {
		const report = await runChecker(stack, { seed: runSeed, ops: historyOps, syncs: false });
		log(summarize(report).split('\n')[0]);
		return report;
	} finally {
		await stack.stop();
	}
}

// Runs one part's seeds (seed, seed + 1, ...), `parallel` at a time, and
// folds their reports: every failing seed is named, loudly, and fails the
// part.
async function seededPart(name, count, run, parallel = 1) {
	const part = { ok: true, seeds: [], failedSeeds: [], failures: [], faultErrors: [], evidence: [] };
	let next = 0;
	const worker = async () => {
		while (next < count) {
			const runSeed = seed + next++;
			let report;
			try {
				report = await run(runSeed);
			} catch (err) {
				report = { ok: false, failures: [err.stack ?? err.message], faultErrors: [] };
			}
			part.seeds.push(runSeed);
			if (report.ok && !report.faultErrors?.length)
				continue;
			part.ok = false;
			part.failedSeeds.push(runSeed);
			part.failures.push(...report.failures.map((f) => `seed ${runSeed}: ${f}`));
			part.faultErrors.push(...(report.faultErrors ?? []));
			part.evidence.push(...(report.evidence ?? []));
			log(`FAIL ${name}: seed ${runSeed} did not converge:\n${[...report.failures,
				...(report.evidence ?? []).map((e) => `evidence ${JSON.stringify(e)}`)].join('\n')}`);
		}
	};
	await Promise.all(Array.from({ length: Math.max(1, parallel) }, worker));
	log(`${name}: ${count - part.failedSeeds.length} of ${count} seeds converged` +
		(part.failedSeeds.length ? `; FAILED seeds ${part.failedSeeds.sort((a, b) => a - b).join(', ')}` : ''));
	return part;
}

// Spins busyLoops processes beside the runs (CPU pressure, as on a loaded
// CI machine); returns a function that stops them.
function cpuPressure(n) {
	const children = Array.from({ length: n }, () =>
		spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
	return () => children.forEach((c) => c.kill('SIGKILL'));
}

const results = { seed, durationMs, parts: {}, buildDir, started: new Date().toISOString() };
const stopPressure = cpuPressure(busyLoops);
let ok = true;
log(`soak: seed ${seed}, ${durationMs / 1000} s per part, parts ${parts.join(', ')}`);
for (const part of parts) {
	let report;
	try {
		if (part === 'load')
			report = await loadPart();
		else if (part === 'checker')
			report = await seededPart('checker', checkerSeeds, (s) => checkerRun(s, durationMs / checkerSeeds));
		else if (part === 'histories')
			report = await seededPart('histories', historyCount, historyRun, historyParallel);
		if (!report)
			throw new Error(`unknown part ${part}`);
	} catch (err) {
		report = { ok: false, failures: [err.stack ?? err.message] };
		log(`FAIL ${part}: ${err.stack ?? err.message}`);
	}
	results.parts[part] = report;
	ok = ok && report.ok && !(report.faultErrors?.length);
	if (report.faultErrors?.length)
		log(`FAIL ${part}: fault errors ${JSON.stringify(report.faultErrors)}`);
}
stopPressure();
fs.writeFileSync(reportFile, JSON.stringify(results, null, 1));
log(`soak: ${ok ? 'passed' : `FAILED (seed ${seed}; make soak SEED=${seed} DURATION=${durationMs / 1000})`}; report in ${reportFile}`);
process.exit(ok ? 0 : 1);
