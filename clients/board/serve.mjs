#!/usr/bin/env node
// Serves the task board (clients/board) with the modules its import map
// names: comb-client from clients/js, and nostr-tools with its @noble and
// @scure dependencies from the repository's node_modules (after `npm ci`).
// Node only, no dependencies.
//
//   node clients/board/serve.mjs [--host 127.0.0.1] [--port 7448] [--relay URL]
//
// It prints the board's URL. With --relay, `/` without a query redirects
// to `/?relay=URL`, so the page talks to that relay (CORS lets a page on
// any origin call it); without it the page calls its own origin.
// Tests import startBoardServer() and listen on port 0.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');

// URL prefix -> directory. Everything else is a 404.
const MOUNTS = [
	['/comb-client/', path.join(root, 'clients/js')],
	['/node_modules/nostr-tools/', path.join(root, 'node_modules/nostr-tools')],
	['/node_modules/@noble/curves/', path.join(root, 'node_modules/@noble/curves')],
	['/node_modules/@noble/hashes/', path.join(root, 'node_modules/@noble/hashes')],
	['/node_modules/@scure/base/', path.join(root, 'node_modules/@scure/base')],
	['/', here],
];

const TYPES = {
	'.html': 'text/html; charset=utf-8',
	'.js': 'text/javascript; charset=utf-8',
	'.mjs': 'text/javascript; charset=utf-8',
	'.css': 'text/css; charset=utf-8',
	'.json': 'application/json',
	'.map': 'application/json',
	'.png': 'image/png',
	'.svg': 'image/svg+xml',
};

// The file a request path names, or null when it names none we serve.
function resolve(urlPath) {
	let decoded;
	try {
		decoded = decodeURIComponent(urlPath);
	} catch {
		return null;
	}
	if (decoded.includes('\0'))
		return null;
	if (decoded === '/')
		decoded = '/index.html';
	for (const [prefix, dir] of MOUNTS) {
		if (!decoded.startsWith(prefix))
			continue;
		const file = path.resolve(dir, `.${decoded.slice(prefix.length - 1)}`);
		if (file !== dir && !file.startsWith(dir + path.sep))
			return null;
		return file;
	}
	return null;
}

function handle(relay, req, res) {
	if (req.method !== 'GET' && req.method !== 'HEAD') {
		res.writeHead(405, { allow: 'GET, HEAD' }).end();
		return;
	}
	const url = new URL(req.url, 'http://board');
	if (relay && url.pathname === '/' && url.search === '') {
		res.writeHead(302, { location: `/?relay=${relay}` }).end();
		return;
	}
	const file = resolve(url.pathname);
	const type = file && TYPES[path.extname(file)];
	if (!type) {
		res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
		return;
	}
	fs.readFile(file, (err, body) => {
		if (err) {
			res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
			return;
		}
		res.writeHead(200, { 'content-type': type, 'content-length': body.length, 'cache-control': 'no-cache' });
		res.end(req.method === 'HEAD' ? undefined : body);
	});
}

/**
 * Starts the server; resolves to {server, url, close()} once it listens.
 * options: host (default 127.0.0.1), port (default 7448; 0 picks one),
 * relay (the relay URL `/` redirects to, as ?relay=).
 */
export function startBoardServer({ host = '127.0.0.1', port = 7448, relay } = {}) {
	const server = http.createServer((req, res) => handle(relay, req, res));
	return new Promise((resolveStart, reject) => {
		server.once('error', reject);
		server.listen(port, host, () => {
			server.off('error', reject);
			const { port: bound } = server.address();
			const shown = host.includes(':') ? `[${host}]` : host;
			resolveStart({
				server,
				url: `http://${shown}:${bound}/`,
				close: () => new Promise((r) => {
					server.closeAllConnections();
					server.close(() => r());
				}),
			});
		});
	});
}

function parseArgs(argv) {
	const out = {};
	for (let i = 0; i < argv.length; i++) {
		const name = argv[i];
		const value = argv[i + 1];
		if (!['--host', '--port', '--relay'].includes(name) || value === undefined)
			throw new Error(`usage: serve.mjs [--host H] [--port N] [--relay URL] (bad argument ${name})`);
		out[name.slice(2)] = value;
		i++;
	}
	return out;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
	let args;
	try {
		args = parseArgs(process.argv.slice(2));
	} catch (err) {
		console.error(err.message);
		process.exit(2);
	}
	if (!fs.existsSync(path.join(root, 'node_modules/nostr-tools'))) {
		console.error('board: node_modules/nostr-tools is missing; run `npm ci` in the repository first');
		process.exit(1);
	}
	const port = args.port === undefined ? 7448 : Number(args.port);
	const relay = args.relay && new URL(args.relay).origin;
	startBoardServer({ host: args.host, port, relay }).then(({ url }) => {
		console.log(`board: ${relay ? `${url}?relay=${relay}` : url}`);
	}, (err) => {
		console.error(`board: ${err.message}`);
		process.exit(1);
	});
	for (const sig of ['SIGINT', 'SIGTERM'])
		process.on(sig, () => process.exit(0));
}
