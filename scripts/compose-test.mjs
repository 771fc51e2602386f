// The client side of scripts/compose-test.sh, against a running compose
// stack: /metrics is not served through the proxy, one client behind the
// proxy gets its own share of WebSockets (the relays trust the proxy's
// X-Forwarded-For), then the dev community's owner creates a channel and writes an
// artifact through the proxy; syncs on each relay directly and one through
// the proxy (a WebSocket upgrade it forwards) receive it. Then the command
// after `--` kills the capture that leads: every sync closes with
// `resync: change feed interrupted`, the syncs are opened again (the
// first write in their snapshots), and a second write reaches each of them
// live, published by the standby that took over. Last, an incremental read
// on each relay holds both writes and is served by the PostgreSQL standby.
//
// usage: node scripts/compose-test.mjs PROXY_URL RELAY1_URL RELAY2_URL
//        OWNER_SECRET_HEX -- FAILOVER_COMMAND...

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';

import { connectWs, post } from '../tests/e2e/lib/harness.mjs';
import { accept, createChannel, uuid } from '../tests/e2e/lib/artifacts.mjs';

const [proxy, relay1, relay2, owner, dashes, ...failover] = process.argv.slice(2);
assert.ok(/^[0-9a-f]{64}$/.test(owner ?? '') && dashes === '--' && failover.length,
	'usage: compose-test.mjs PROXY RELAY1 RELAY2 OWNER_SECRET -- FAILOVER_COMMAND...');

// /metrics stays off the public port; each relay serves it itself.
assert.equal((await fetch(`${proxy}/metrics`)).status, 404, 'the proxy does not serve /metrics');
assert.equal((await fetch(`${relay1}/metrics`)).status, 200);

// Behind the proxy, the relays count each client by the address nginx
// forwards, whatever the client itself puts in X-Forwarded-For: more than
// a client address's share of WebSockets (COMB_MAX_CONNECTIONS_PER_IP, 16
// per relay) through the proxy from this one client are refused. (Two
// client addresses cannot be shown from this host: e2e/client_addr does
// that with a proxy of its own.)
{
	const held = [];
	let refused = 0;
	for (let i = 0; i < 40; i++) {
		try {
			held.push(await connectWs(proxy, null, { headers: { 'x-forwarded-for': `10.0.${i}.1` } }));
		} catch (err) {
			assert.equal(err.status, 503, err.message);
			refused++;
		}
	}
	assert.ok(refused > 0 && held.length >= 16, `one client behind the proxy is capped (${held.length} held)`);
	for (const c of held)
		c.ws.terminate();
}

const through = { url: proxy };
const h = await createChannel(through, owner, { name: 'compose-test' });
const write = (d) => accept(through, owner, { d, h, op: 'create', title: d });

// Opens sync `id` on every client, retried while a relay still waits for
// the feed; resolves to the ids each snapshot held.
async function openSyncs(clients, id) {
	return Promise.all(clients.map(async (c) => {
		for (let tries = 0; ; tries++) {
			c.send(['REQ', id, { artifact: 'current', '#h': [h] }]);
			const ids = [];
			for (;;) {
				const m = await c.next((x) => x[1] === id, 10000);
				if (m[0] === 'EVENT') {
					ids.push(m[2].id);
					continue;
				}
				if (m[0] === 'EOSE')
					return ids;
				assert.equal(m[0], 'CLOSED');
				assert.ok(m[2] === 'error: change feed unavailable' && tries < 20,
					`${c.name}: sync ${id} refused: ${m[2]}`);
				break;
			}
			await new Promise((r) => setTimeout(r, 500));
		}
	}));
}

async function seenLive(clients, id, ev) {
	for (const c of clients) {
		const m = await c.next((x) => x[1] === id, 10000);
		assert.deepEqual([m[0], m[2]?.id], ['EVENT', ev.id], `${c.name}: ${JSON.stringify(m)}`);
	}
}

const clients = [];
for (const [name, base] of [['relay1', relay1], ['relay2', relay2], ['proxy', proxy]]) {
	const c = await connectWs(base, owner);
	c.name = name;
	clients.push(c);
}

assert.deepEqual(await openSyncs(clients, 'before'), [[], [], []]);
const first = await write(uuid());
await seenLive(clients, 'before', first);
console.log('compose-test: a write through the proxy reached syncs on both relays and the proxy');

console.log(`compose-test: ${failover.join(' ')}`);
execFileSync(failover[0], failover.slice(1), { stdio: 'inherit' });
for (const c of clients) {
	const m = await c.next((x) => x[1] === 'before', 15000);
	assert.deepEqual(m, ['CLOSED', 'before', 'resync: change feed interrupted'], c.name);
}

const snapshots = await openSyncs(clients, 'after');
assert.deepEqual(snapshots, [[first.id], [first.id], [first.id]]);
const second = await write(uuid());
await seenLive(clients, 'after', second);
console.log('compose-test: after the failover a write reached every sync again');

// Reads go to the standby (compose.yaml's postgres-standby): an
// incremental read on each relay holds both writes (the standby has
// replayed them, or the read waited for it or went to the primary), and
// each relay counts the reads its standby served (retried for up to 60 s:
// a read right after the writes may still have gone to the primary, a
// standby whose replication connection was refused at first retries it,
// and one whose replay waits for a conflicting read gets past it within
// max_standby_streaming_delay).
for (const [name, base] of [['relay1', relay1], ['relay2', relay2]]) {
	let served = 0;
	let text = '';
	for (let tries = 0; tries < 120 && served === 0; tries++) {
		const r = await post(base, '/query', [{ artifact: 'incremental', '#h': [h] }], owner,
			{ nip98: { extraTags: [['nonce', uuid()]] } });
		assert.equal(r.status, 200, `${name}: ${r.body}`);
		const got = JSON.parse(r.body).changes.map((c) => c.event?.id).sort();
		assert.deepEqual(got, [first.id, second.id].sort(), name);
		text = await (await fetch(`${base}/metrics`)).text();
		served = Number(text.match(/^comb_read_standby_reads_total\{[^}]*\} (\d+)$/m)?.[1] ?? 0);
		if (served === 0)
			await new Promise((r) => setTimeout(r, 500));
	}
	assert.ok(served > 0, `${name}: no read was served by the standby:\n${text.split('\n').filter((l) => l.startsWith('comb_read')).join('\n')}`);
}
console.log('compose-test: both relays served reads from the streaming standby');

for (const c of clients)
	c.ws.close();
