// Generates tests/vectors/events.json: events signed by nostr-tools 2.x
// (finalizeEvent) with their NIP-01 serialization (serializeEvent), so the
// C serializer, id and Schnorr code can be checked byte for byte against
// the reference client. Each entry holds the secret key, the event, the
// serialization and the event as JSON.stringify writes it with the keys in
// comb's order (id, pubkey, created_at, kind, tags, content, sig).
//
// Run from a scratch directory outside the repository that has nostr-tools
// installed (the module is resolved from the current directory):
//   mkdir -p /tmp/vec && cd /tmp/vec && npm install nostr-tools@2
//   node /path/to/comb/tests/vectors/make_vectors.mjs > /path/to/comb/tests/vectors/events.json
// Signatures use random auxiliary data, so each run gives new sig values;
// ids and serializations stay the same.
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const require = createRequire(pathToFileURL(process.cwd() + '/').href);
const nt = require('nostr-tools/pure');
const { finalizeEvent, serializeEvent, getPublicKey, verifyEvent, getEventHash } = nt;

// Deterministic secret keys: SHA-256 of a label (valid with overwhelming
// probability; getPublicKey throws otherwise).
function secretKey(label) {
	return new Uint8Array(createHash('sha256').update(label).digest());
}

function hex(bytes) {
	return Buffer.from(bytes).toString('hex');
}

let allControls = '';
for (let c = 0; c < 0x20; c++)
	allControls += String.fromCharCode(c);

const cases = [
	['quotes and backslashes', 1, [], 'say "hi" \\ back\\slash \\"both\\" \\\\'],
	['short escapes', 1, [], 'a\nb\rc\td\be\ff'],
	['control characters', 1, [], '\u0001 start \u001f unit \u007f del'],
	['all c0 controls', 1, [], allControls],
	['line and paragraph separators', 1, [], 'ls\u2028ps\u2029end'],
	['emoji', 1, [['t', '🌰']], 'chestnut 🌰 party 🎉 family 👩‍👩‍👧 flag 🇫🇷'],
	['non-ascii tag values', 1,
		[['t', 'café'], ['name', '日本語'], ['title', 'Ünïcödé — “quoted” …'], ['r', 'Ω≈ç√∫']],
		'ça va'],
	['empty tags', 1, [], 'no tags here'],
	['empty content', 1, [['t', 'x']], ''],
	['empty tag strings', 1, [['e', ''], ['', ''], ['x'], ['', 'v', '']], 'tags with empty strings'],
	['nul in content', 1, [], 'a\u0000b\u0000'],
	['large created_at', 1, [], 'far future', 9007199254740991],
	['zero created_at and kind', 0, [], '{"name":"meta"}', 0],
	['max kind', 65535, [['h', '0b1b7f0e-6a51-4b51-9d1a-3f0e2c4d5e6f']], 'kind 65535'],
	['slashes and html', 1, [['u', 'https://example.com/a/b?c=d&e=<f>']], '</script><b>bold</b> a/b'],
	['escapes in tags', 1, [['t', 'tab\there'], ['t', 'nl\nhere'], ['t', 'q"uote'], ['t', 'b\\s'], ['t', '\u0001\u001f\u007f\u2028']], 'escapes in tags'],
	['artifact revision', 45010,
		[['ar', '1'], ['d', '5a0f2f6e-3c1b-4a9e-8f7d-2b6c1e0d9a84'],
			['h', '0b1b7f0e-6a51-4b51-9d1a-3f0e2c4d5e6f'], ['type', 'demo.task'],
			['title', 'Fix the payment timeout'], ['op', 'create']],
		'the payment provider times out after 30 s'],
	['json-looking content', 1, [], '["EVENT",{"id":"x"}]\n\t{"a":1}'],
	['long content', 1, [['t', 'long']], 'lorem ipsum '.repeat(200)],
	['many tags', 1, Array.from({ length: 256 }, (_, i) => ['t', String(i)]), 'exactly 256 tags'],
];

const out = [];
cases.forEach(([name, kind, tags, content, createdAt], i) => {
	const sk = secretKey(`comb vector ${i}`);
	const event = finalizeEvent({
		kind,
		created_at: createdAt ?? 1764464523 + i,
		tags,
		content,
	}, sk);
	if (!verifyEvent(event) || getEventHash(event) !== event.id || event.pubkey !== getPublicKey(sk))
		throw new Error(`vector ${name} does not verify`);
	const ordered = {
		id: event.id,
		pubkey: event.pubkey,
		created_at: event.created_at,
		kind: event.kind,
		tags: event.tags,
		content: event.content,
		sig: event.sig,
	};
	out.push({
		name,
		secret_key: hex(sk),
		event: ordered,
		serialized: serializeEvent(event),
		json: JSON.stringify(ordered),
	});
});

process.stdout.write(JSON.stringify(out, null, 1) + '\n');
