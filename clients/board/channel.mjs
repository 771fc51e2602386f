#!/usr/bin/env node
// Gives the board a channel: makes sure the relay's community has an open
// channel of a name (any key may read and write there), creating it with a
// community admin's key when the admin can read none of that name.
//
//   node clients/board/channel.mjs --relay URL --key FILE [--name board]
//
// FILE holds the admin's secret key in hex (make run: var/dev-owner.key).
// Prints the channel id.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { CombClient, tagValue } from '../js/index.js';

/**
 * Resolves to the id of the open channel called name, created by the
 * admin (secretKey) when none is readable. options: relay, secretKey, name.
 */
export async function ensureOpenChannel({ relay, secretKey, name }) {
	const client = new CombClient({ url: relay, secretKey });
	const events = await client.query({ kinds: [9007, 9002], limit: 1000 });
	// name and visibility of each channel, as its creation and edits left them
	const channels = new Map();
	for (const ev of events.sort((a, b) => a.created_at - b.created_at)) {
		const h = tagValue(ev, 'h');
		const c = channels.get(h) ?? { name: undefined, visibility: 'open' };
		c.name = tagValue(ev, 'name') ?? c.name;
		c.visibility = tagValue(ev, 'visibility') ?? c.visibility;
		channels.set(h, c);
	}
	for (const [h, c] of channels) {
		if (c.name === name && c.visibility === 'open')
			return h;
	}
	const h = crypto.randomUUID();
	await client.publish({ kind: 9007, tags: [['h', h], ['name', name], ['visibility', 'open']] });
	return h;
}

function parseArgs(argv) {
	const out = { name: 'board' };
	for (let i = 0; i < argv.length; i += 2) {
		const name = argv[i];
		if (!['--relay', '--key', '--name'].includes(name) || argv[i + 1] === undefined)
			throw new Error(`usage: channel.mjs --relay URL --key FILE [--name NAME] (bad argument ${name})`);
		out[name.slice(2)] = argv[i + 1];
	}
	if (!out.relay || !out.key)
		throw new Error('usage: channel.mjs --relay URL --key FILE [--name NAME]');
	return out;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
	try {
		const args = parseArgs(process.argv.slice(2));
		const secretKey = fs.readFileSync(args.key, 'utf8').trim();
		console.log(await ensureOpenChannel({ relay: args.relay, secretKey, name: args.name }));
	} catch (err) {
		console.error(`channel: ${err.message}`);
		process.exit(1);
	}
}
