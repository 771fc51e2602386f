// The soak's load phase (issue 7, item 3): many syncs held open on one
// relay node while a steady write load runs, reporting the relay's memory
// over time (RSS sampled; growth after warm-up is a failure), the
// delivery latency of live frames (from the start of the write's POST to
// the frame's arrival, every sync counted) and every error.
//
// The data set stays the same size, so that any growth is the relay's:
// a fixed set of artifacts in open channels is edited (90%) and moved
// between channels (10%). Every sync covers one channel. At the end each
// sync must equal a fresh `current` read of its channel.

import { newKey, signEvent } from '../e2e/lib/harness.mjs';
import { publish, publishSigned, revisionTags, uuid } from '../e2e/lib/artifacts.mjs';
import { SyncStore, diffStores, pidListeningOn, rssKb, truthFor } from '../e2e/lib/clients.mjs';
import { rng } from '../e2e/lib/checker.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted, p) {
	if (sorted.length === 0)
		return null;
	return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

// Runs fn over items with at most n at once.
async function pool(items, n, fn) {
	let next = 0;
	const worker = async () => {
		while (next < items.length) {
			const i = next++;
			await fn(items[i], i);
		}
	};
	await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
}

/**
 * Runs the load against stack (one relay node is measured: stack.urls[0]).
 * opts: seed, syncs (2000), channels (20), perChannel (20 artifacts),
 * rate (writes per second, 10), durationMs, warmupMs, sampleMs (5000),
 * log. Resolves to the report {ok, failures[], syncs, writes, latency,
 * rss, ...}.
 */
export async function runLoad(stack, opts = {}) {
	const log = opts.log ?? (() => {});
	const random = rng(opts.seed ?? 1);
	const nSyncs = opts.syncs ?? 2000;
	const nChannels = opts.channels ?? 20;
	const perChannel = opts.perChannel ?? 20;
	const rate = opts.rate ?? 10;
	const durationMs = opts.durationMs ?? 600000;
	const warmupMs = opts.warmupMs ?? Math.max(15000, Math.min(120000, durationMs / 4));
	const sampleMs = opts.sampleMs ?? 5000;
	const url = stack.urls[0];
	const admin = stack.admins[0];
	const report = {
		ok: false, failures: [], syncs: { wanted: nSyncs, live: 0, opened: 0 },
		writes: { ok: 0, failed: 0, errors: {} }, deliveries: 0,
		latency: null, rss: null, resyncs: {}, drops: 0, violations: [],
	};
	const fail = (m) => report.failures.push(m);
	const pick = (arr) => arr[Math.floor(random() * arr.length)];
	const post = (template) => publish({ url }, admin, template, { timeoutMs: 30000 })
		.catch((err) => ({ status: 0, raw: err.message, body: null }));

	// --- data -----------------------------------------------------------
	const channels = [];
	for (let i = 0; i < nChannels; i++) {
		const h = uuid();
		const r = await post({ kind: 9007, tags: [['h', h], ['name', `load ${i}`]] });
		if (r.status !== 200)
			throw new Error(`cannot create a channel: ${r.raw}`);
		channels.push(h);
	}
	const artifacts = [];   // {d, h, id, busy}
	const seeds = [];
	for (const h of channels)
		for (let i = 0; i < perChannel; i++)
			seeds.push(h);
	await pool(seeds, 8, async (h) => {
		const d = uuid();
		const r = await post({ kind: 45010, tags: revisionTags({ d, h, op: 'create', title: 'load' }), content: 'x'.repeat(300) });
		if (r.status !== 200)
			throw new Error(`cannot create an artifact: ${r.raw}`);
		artifacts.push({ d, h, id: r.event.id, busy: false });
	});
	log(`load: ${channels.length} channels, ${artifacts.length} artifacts`);

	// --- syncs ----------------------------------------------------------
	const sent = new Map();         // event id -> time the POST began
	const latencies = [];
	const latenciesAfterWarmup = [];
	let warm = false;
	const onEvent = (ev) => {
		const t0 = sent.get(ev.id);
		if (t0 === undefined)
			return;
		const ms = Date.now() - t0;
		report.deliveries++;
		latencies.push(ms);
		if (warm)
			latenciesAfterWarmup.push(ms);
	};
	const readers = Array.from({ length: Math.max(1, Math.ceil(nSyncs / 40)) }, () => newKey());
	const syncs = Array.from({ length: nSyncs }, (_, i) =>
		new SyncStore([url], readers[i % readers.length].sk, [channels[i % channels.length]],
			{ name: `load sync ${i}`, onEvent }));
	const t0 = Date.now();
	await pool(syncs, 50, async (s) => {
		try {
			await s.open(60000);
		} catch (err) {
			fail(err.message);
		}
	});
	report.syncs.opened = syncs.filter((s) => s.state === 'live').length;
	report.syncs.openMs = Date.now() - t0;
	log(`load: ${report.syncs.opened} of ${nSyncs} syncs live in ${report.syncs.openMs} ms`);
	if (report.syncs.opened < nSyncs)
		fail(`only ${report.syncs.opened} of ${nSyncs} syncs opened`);

	// --- steady writes and samples ----------------------------------------
	const pid = pidListeningOn(stack.ports[0]);
	const samples = [];
	const started = Date.now();
	const deadline = started + durationMs;
	let running = true;
	let inflight = 0;
	let n = 0;
	const write = async () => {
		const free = artifacts.filter((a) => !a.busy);
		if (free.length === 0)
			return;
		const a = pick(free);
		a.busy = true;
		inflight++;
		const move = random() < 0.1;
		const h = move ? pick(channels.filter((x) => x !== a.h)) : a.h;
		const spec = { d: a.d, h, op: move ? 'move' : 'update', prev: a.id, title: `load ${++n}` };
		const tags = revisionTags(spec);
		// signed first, so that a frame arriving before the answer counts
		const event = signEvent(admin, { kind: 45010, tags, content: 'y'.repeat(300) });
		sent.set(event.id, Date.now());
		const r = await publishSigned({ url }, admin, event, { timeoutMs: 30000 })
			.catch((err) => ({ status: 0, raw: err.message, body: null }));
		if (r.status === 200 && r.body?.accepted) {
			report.writes.ok++;
			a.id = r.event.id;
			a.h = h;
		} else {
			sent.delete(event.id);
			report.writes.failed++;
			const why = `${r.status} ${r.body?.message ?? r.raw?.slice(0, 80)}`;
			report.writes.errors[why] = (report.writes.errors[why] ?? 0) + 1;
		}
		a.busy = false;
		inflight--;
	};
	const writer = async () => {
		const gap = 1000 / rate;
		let next = Date.now();
		while (running && Date.now() < deadline) {
			next += gap;
			if (inflight < 32)
				write();
			const wait = next - Date.now();
			if (wait > 0)
				await sleep(wait);
		}
	};
	const sampler = async () => {
		while (running) {
			const s = {
				t: Date.now() - started,
				rssKb: rssKb(pid),
				writes: report.writes.ok,
				deliveries: report.deliveries,
				live: syncs.filter((x) => x.state === 'live').length,
			};
			samples.push(s);
			if (!warm && s.t >= warmupMs) {
				warm = true;
				log(`load: warm-up over at ${s.t} ms, RSS ${s.rssKb} kB`);
			}
			if (samples.length % 12 === 0)
				log(`load: ${Math.round(s.t / 1000)} s, RSS ${s.rssKb} kB, ${s.writes} writes, ` +
					`${s.deliveries} deliveries, ${s.live} syncs live`);
			await sleep(sampleMs);
		}
	};
	const samplerDone = sampler();
	await writer();
	while (inflight > 0)
		await sleep(50);
	await sleep(3000);
	running = false;
	await samplerDone;

	// --- results ----------------------------------------------------------
	const sorted = latencies.slice().sort((x, y) => x - y);
	const sortedWarm = latenciesAfterWarmup.slice().sort((x, y) => x - y);
	report.latency = {
		all: { n: sorted.length, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted.at(-1) ?? null },
		afterWarmup: { n: sortedWarm.length, p50: percentile(sortedWarm, 0.5), p99: percentile(sortedWarm, 0.99),
			max: sortedWarm.at(-1) ?? null },
	};
	const after = samples.filter((s) => s.t >= warmupMs && s.rssKb);
	if (after.length >= 2) {
		const k = Math.max(1, Math.floor(after.length / 5));
		const mean = (xs) => xs.reduce((sum, x) => sum + x.rssKb, 0) / xs.length;
		const first = mean(after.slice(0, k));
		const last = mean(after.slice(-k));
		const max = Math.max(...after.map((s) => s.rssKb));
		const allowed = Math.max(8 * 1024, first * 0.05);
		report.rss = { warmupKb: Math.round(first), endKb: Math.round(last), maxKb: max,
			growthKb: Math.round(last - first), allowedKb: Math.round(allowed), samples };
		if (last - first > allowed)
			fail(`relay RSS grew by ${Math.round(last - first)} kB after warm-up (allowed ${Math.round(allowed)} kB)`);
	} else {
		fail('too few RSS samples after warm-up (make DURATION longer)');
	}
	report.writes.perSecond = +(report.writes.ok / (durationMs / 1000)).toFixed(1);
	if (report.writes.failed)
		fail(`${report.writes.failed} writes failed: ${JSON.stringify(report.writes.errors)}`);
	for (const s of syncs) {
		report.drops += s.stats.drops;
		for (const [k, v] of Object.entries(s.stats.resyncs))
			report.resyncs[k] = (report.resyncs[k] ?? 0) + v;
		report.violations.push(...s.violations);
	}
	report.violations = report.violations.slice(0, 20);
	for (const v of report.violations)
		fail(v);

	// every sync equals its channel
	const truths = new Map();
	for (const h of channels)
		truths.set(h, await truthFor(url, admin, { '#h': [h] }));
	let divergent = 0;
	for (const s of syncs) {
		if (s.state !== 'live') {
			await s.whenSettled(30000).catch(() => {});
		}
		const truth = truths.get(s.channels[0]);
		let diff = diffStores(s.revisions(), truth);
		const until = Date.now() + 10000;
		while (diff && Date.now() < until) {
			await sleep(200);
			diff = diffStores(s.revisions(), truth);
		}
		if (diff) {
			divergent++;
			if (divergent <= 5)
				fail(`${s.name} (${s.state}) differs from its channel: ${JSON.stringify(diff)}`);
		}
	}
	report.syncs.live = syncs.filter((s) => s.state === 'live').length;
	report.syncs.divergent = divergent;
	for (const s of syncs)
		s.close();
	report.ok = report.failures.length === 0;
	return report;
}
