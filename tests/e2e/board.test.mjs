// The task board (clients/board) in headless Chromium, driven by
// playwright-core, against a real relay: two pages with their own keys on
// one board; a task created in one shows in the other within a second; a
// drag moves it in the other; a page that was offline while the other
// edited, deleted, moved and created comes back to exactly the same board;
// a page that creates, edits, drags and deletes while offline shows them at
// once as pending and both pages converge when it is back; a reload starts
// from IndexedDB and fetches only what changed; a NIP-07 extension's key
// is used when present, and its refusal leaves the page `unauthorized`.
//
// Needs Debian's chromium at /usr/bin/chromium (scripts/install-deps.sh
// installs it); skipped without it. COMB_BOARD_SCREENSHOT=path saves a
// screenshot of the final board there (docs/board.png is made that way).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { finalizeEvent } from 'nostr-tools/pure';

import { CombClient } from '../../clients/js/index.js';
import { ensureOpenChannel } from '../../clients/board/channel.mjs';
import { startBoardServer } from '../../clients/board/serve.mjs';
import { createChannel } from './lib/artifacts.mjs';
import { newKey, scrapeMetrics, startRelay } from './lib/harness.mjs';

const CHROMIUM = '/usr/bin/chromium';
const skip = fs.existsSync(CHROMIUM) ? false :
	`${CHROMIUM} is missing: install Debian's chromium (scripts/install-deps.sh does)`;

const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
	'--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic'];

describe('task board in Chromium', { skip }, () => {
	let stack, board, browser, alpha, beta, seeder;
	let a, b; // {context, page} of the two browsers

	before(async () => {
		const { chromium } = await import('playwright-core');
		// The page calls the relay at ?relay=http://localhost:PORT, so the
		// community is the one on host localhost. A PostgreSQL of its own:
		// a page's live frames wait for the read horizon, which another
		// test's open transaction on the shared one may hold back for
		// seconds, and one test here times them.
		stack = await startRelay({ communities: [{ hosts: ['localhost'] }], ownCluster: true });
		const admin = stack.admins[0];
		// Open channels: every key of the community may read and write.
		// channel.mjs makes alpha (as make run makes the dev board's) and
		// finds it again rather than making a second one; a private
		// channel of the same name does not count.
		await createChannel(stack, admin, { name: 'alpha', visibility: 'private' });
		alpha = await ensureOpenChannel({ relay: stack.url, secretKey: admin, name: 'alpha' });
		assert.equal(await ensureOpenChannel({ relay: stack.url, secretKey: admin, name: 'alpha' }), alpha);
		beta = await createChannel(stack, admin, { name: 'beta', visibility: 'open' });
		seeder = new CombClient({ url: stack.url, secretKey: newKey().sk });
		const seeds = [['Write the release notes', 'open'], ['Fix the payment timeout', 'doing'],
			['Review the sync design', 'open'], ['Update the dashboard', 'done'],
			['Plan the offsite', 'open'], ['Rotate the relay key', 'doing']];
		for (const [title, status] of seeds)
			await seeder.createArtifact({ h: alpha, type: 'demo.task', title, tags: [['status', status]] });
		board = await startBoardServer({ port: 0 });
		// --user-data-dir is Playwright's: a fresh profile for each launch.
		browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
		a = await openBoard();
		b = await openBoard();
	});

	after(async () => {
		await browser?.close();
		await board?.close();
		await stack?.stop();
	});

	// A new browser context (its own localStorage, so its own key, and its
	// own IndexedDB) with the board on channel alpha, once live.
	async function openBoard() {
		const context = await browser.newContext({ viewport: { width: 1100, height: 600 } });
		context.setDefaultTimeout(5000);
		const page = await context.newPage();
		const errors = [];
		page.on('pageerror', (err) => errors.push(err.message));
		await page.goto(`${board.url}?relay=${stack.url}&channel=${alpha}`);
		await waitLive(page);
		return { context, page, errors };
	}

	function waitLive(page, timeout = 10000) {
		return page.waitForFunction(() => window.board?.view.status === 'live', null, { timeout });
	}

	const card = (page, title) => page.locator('.card', { hasText: title });
	// How long a write may take to show in another page where the test is
	// not about its speed (a busy machine).
	const OTHER_PAGE_MS = 30000;
	const column = (page, status) => page.locator(`.column[data-status="${status}"]`);

	// The shown channel's columns as the page draws them: titles per status.
	function drawn(page) {
		return page.evaluate(() => Object.fromEntries([...document.querySelectorAll('.column')].map((c) =>
			[c.dataset.status, [...c.querySelectorAll('.card .title')].map((t) => t.textContent)])));
	}

	const snapshot = (page) => page.evaluate(() => window.board.snapshot());

	// Resolves once fn() returns a value deepEqual to want.
	async function eventually(fn, want, what, timeoutMs = 10000) {
		const deadline = Date.now() + timeoutMs;
		let got;
		for (;;) {
			got = await fn();
			try {
				assert.deepEqual(got, want);
				return;
			} catch (err) {
				if (Date.now() > deadline)
					throw new Error(`${what}: not reached in ${timeoutMs} ms\n${err.message}`);
			}
			await new Promise((r) => setTimeout(r, 50));
		}
	}

	test('the two pages have their own keys and show the same board', async () => {
		const ka = await a.page.locator('#pubkey').getAttribute('data-pubkey');
		const kb = await b.page.locator('#pubkey').getAttribute('data-pubkey');
		assert.match(ka, /^[0-9a-f]{64}$/);
		assert.match(kb, /^[0-9a-f]{64}$/);
		assert.notEqual(ka, kb);
		assert.equal(await a.page.locator('#status').textContent(), 'live');
		const want = {
			open: ['Plan the offsite', 'Review the sync design', 'Write the release notes'],
			doing: ['Fix the payment timeout', 'Rotate the relay key'],
			done: ['Update the dashboard'],
		};
		assert.deepEqual(await drawn(a.page), want);
		assert.deepEqual(await drawn(b.page), want);
	});

	test('a task created in one page appears in the other within a second', async (t) => {
		const title = 'Ship the board';
		// Both times come from the browser's clock: when a's POST /events
		// was answered (the task exists), and when b's view drew it.
		await b.page.evaluate((want) => {
			window.seen = new Promise((resolve) => {
				const check = ({ upserts }) => {
					if (upserts.some((ev) => ev.tags.some((tag) => tag[0] === 'title' && tag[1] === want)))
						resolve(Date.now());
				};
				window.board.view.on('change', check);
			});
		}, title);
		const answered = a.page.waitForResponse((r) => r.url() === `${stack.url}/events`);
		await a.page.fill('#new-title', title);
		const submitted = Date.now();
		await a.page.press('#new-title', 'Enter');
		const timing = (await answered).request().timing();
		const createdAt = timing.startTime + timing.responseEnd;
		const shownAt = await b.page.evaluate(() => window.seen);
		await card(b.page, title).waitFor();
		t.diagnostic(`shown in the other page ${Math.round(shownAt - createdAt)} ms after the relay ` +
			`accepted it, ${shownAt - submitted} ms after the submit`);
		assert.ok(shownAt - createdAt < 1000, `shown ${shownAt - createdAt} ms after the relay accepted it`);
		assert.equal(await card(b.page, title).locator('xpath=ancestor::section').getAttribute('data-status'), 'open');
		const [task] = (await snapshot(b.page)).filter((x) => x.title === title);
		const author = await a.page.locator('#pubkey').getAttribute('data-pubkey');
		assert.equal(await card(b.page, title).getAttribute('data-author'), author);
		assert.equal(task.h, alpha);
	});


	test('a drag in one page moves the card in the other', async () => {
		const title = 'Ship the board';
		await card(a.page, title).dragTo(column(a.page, 'doing'));
		await column(b.page, 'doing').locator('.card', { hasText: title }).waitFor({ timeout: OTHER_PAGE_MS });
		await column(a.page, 'doing').locator('.card', { hasText: title }).waitFor({ timeout: 5000 });
		const [task] = (await snapshot(b.page)).filter((t) => t.title === title);
		assert.equal(task.status, 'doing');
	});

	test('a refused write shows the relay\'s message', async () => {
		// Only its creator (or a channel admin) may delete a task.
		await card(a.page, 'Update the dashboard').locator('.delete').click();
		await a.page.locator('#message', {
			hasText: 'restricted: only the creator or a channel admin may delete or restore',
		}).waitFor();
		// the outbox rolled the delete back
		await card(a.page, 'Update the dashboard').waitFor();
		assert.equal(await card(a.page, 'Update the dashboard').count(), 1);
		assert.equal(await a.page.evaluate(() => window.board.view.pending), 0);
	});

	test('a page that was offline converges to exactly the other page\'s board', async () => {
		const before = await snapshot(b.page);
		await b.context.setOffline(true);
		await b.page.waitForFunction(() => window.board.view.status === 'offline', null, { timeout: 5000 });

		// Page a edits a title, deletes its own task, moves to beta, drags
		// and creates.
		await card(a.page, 'Plan the offsite').locator('.title').click();
		await a.page.locator('.card .edit').fill('Plan the team offsite');
		await a.page.press('.card .edit', 'Enter');
		await card(a.page, 'Plan the team offsite').waitFor();
		await card(a.page, 'Ship the board').locator('.delete').click();
		await card(a.page, 'Ship the board').waitFor({ state: 'detached' });
		await card(a.page, 'Rotate the relay key').locator('.move').selectOption(beta);
		await card(a.page, 'Rotate the relay key').waitFor({ state: 'detached' });
		await card(a.page, 'Review the sync design').dragTo(column(a.page, 'done'));
		await column(a.page, 'done').locator('.card', { hasText: 'Review the sync design' }).waitFor();
		await a.page.fill('#new-title', 'Draft the onboarding guide');
		await a.page.press('#new-title', 'Enter');
		await card(a.page, 'Draft the onboarding guide').waitFor();

		// b saw none of it: it was really offline.
		assert.deepEqual(await snapshot(b.page), before);
		assert.equal(await b.page.locator('#status').textContent(), 'offline');

		await b.context.setOffline(false);
		await eventually(() => a.page.evaluate(() => window.board.view.pending), 0, 'a sent its writes');
		const want = await snapshot(a.page);
		await eventually(() => snapshot(b.page), want, 'b holds what a holds');
		await waitLive(b.page);
		assert.deepEqual(await drawn(b.page), await drawn(a.page));
		assert.deepEqual(await drawn(b.page), {
			open: ['Draft the onboarding guide', 'Plan the team offsite', 'Write the release notes'],
			doing: ['Fix the payment timeout'],
			done: ['Review the sync design', 'Update the dashboard'],
		});

		// Both match a fresh read of the relay.
		const fresh = await seeder.query({ artifact: 'current', '#h': [alpha, beta], '#type': ['demo.task'] });
		assert.deepEqual(want.map((t) => t.id).sort(), fresh.map((e) => e.id).sort());
		const moved = want.find((t) => t.title === 'Rotate the relay key');
		assert.equal(moved.h, beta);
		assert.equal(moved.status, 'doing');

		// And on channel beta too.
		for (const p of [a.page, b.page])
			await p.locator('#channel').selectOption(beta);
		assert.deepEqual(await drawn(b.page), { open: [], doing: ['Rotate the relay key'], done: [] });
		assert.deepEqual(await drawn(a.page), await drawn(b.page));
		for (const p of [a.page, b.page])
			await p.locator('#channel').selectOption(alpha);
	});

	test('writes made offline show at once as pending and reach the other page when back', async () => {
		// b's own task, made online, to delete offline (only its creator may)
		await b.page.fill('#new-title', 'Temporary note');
		await b.page.press('#new-title', 'Enter');
		await card(a.page, 'Temporary note').waitFor();
		await eventually(() => b.page.evaluate(() => window.board.view.pending), 0, 'b sent its create');

		await b.context.setOffline(true);
		await b.page.waitForFunction(() => window.board.view.status === 'offline', null, { timeout: 5000 });
		const before = await snapshot(a.page);
		await b.page.fill('#new-title', 'Written offline');
		await b.page.press('#new-title', 'Enter');
		await card(b.page, 'Fix the payment timeout').locator('.title').click();
		await b.page.locator('.card .edit').fill('Fix the payment timeout today');
		await b.page.press('.card .edit', 'Enter');
		await card(b.page, 'Draft the onboarding guide').dragTo(column(b.page, 'doing'));
		await card(b.page, 'Temporary note').locator('.delete').click();

		// shown at once, marked pending; nothing reached a
		await card(b.page, 'Written offline').and(b.page.locator('.card.pending')).waitFor();
		await card(b.page, 'Fix the payment timeout today').and(b.page.locator('.card.pending')).waitFor();
		await column(b.page, 'doing').locator('.card.pending', { hasText: 'Draft the onboarding guide' }).waitFor();
		await card(b.page, 'Temporary note').waitFor({ state: 'detached' });
		assert.equal(await b.page.evaluate(() => window.board.view.pending), 4);
		assert.equal(await b.page.locator('#pending').textContent(), '4 pending');
		assert.deepEqual(await snapshot(a.page), before);

		await b.context.setOffline(false);
		await eventually(() => b.page.evaluate(() => window.board.view.pending), 0, 'b sent its outbox');
		const want = await snapshot(b.page);
		await eventually(() => snapshot(a.page), want, 'a holds what b holds');
		assert.ok(want.every((x) => !x.pending));
		const titles = want.filter((x) => x.h === alpha).map((x) => x.title).sort();
		assert.deepEqual(titles, ['Draft the onboarding guide', 'Fix the payment timeout today', 'Plan the team offsite',
			'Review the sync design', 'Update the dashboard', 'Write the release notes', 'Written offline']);
		assert.equal(want.find((x) => x.title === 'Draft the onboarding guide').status, 'doing');
		const fresh = await seeder.query({ artifact: 'current', '#h': [alpha, beta], '#type': ['demo.task'] });
		assert.deepEqual(want.map((x) => x.id).sort(), fresh.map((e) => e.id).sort());
		assert.deepEqual(await drawn(b.page), await drawn(a.page));
		assert.equal(await b.page.locator('.card.pending').count(), 0);
	});

	test('a reload starts from IndexedDB and fetches only what changed', async (t) => {
		const held = (await snapshot(b.page)).length;
		assert.ok(held >= 6, `b holds ${held} tasks`);

		// Hold b's incremental reads and its WebSocket back after the
		// reload: the board must draw every task from IndexedDB before the
		// relay answers.
		let release;
		const released = new Promise((r) => {
			release = r;
		});
		await b.page.route(`${stack.url}/query`, async (route) => {
			if (route.request().method() === 'POST' && route.request().postData()?.includes('"incremental"'))
				await released;
			await route.continue();
		});
		await b.page.routeWebSocket((url) => url.protocol === 'ws:', async (ws) => {
			await released;
			ws.connectToServer();
		});
		await b.page.reload();
		await b.page.waitForFunction((n) => document.querySelectorAll('.card').length > 0 &&
			window.board?.view.all().length === n, held, { timeout: 10000 });
		assert.equal(await b.page.evaluate(() => window.board.view.stats.reads), 0);
		assert.notEqual(await b.page.locator('#status').textContent(), 'live');
		// One change while b is held back: its stored cursor predates it.
		await card(a.page, 'Write the release notes').dragTo(column(a.page, 'doing'));
		await column(a.page, 'doing').locator('.card', { hasText: 'Write the release notes' }).waitFor();
		// the card moves at once, as pending: wait until the relay took it
		await eventually(() => a.page.evaluate(() => window.board.view.pending), 0, 'a sent its move');
		release();
		await waitLive(b.page);
		await column(b.page, 'doing').locator('.card', { hasText: 'Write the release notes' }).waitFor();
		await b.page.unroute(`${stack.url}/query`);

		// fetched counts the artifacts the catch-up returned (over the
		// resumable sync, the relay offers it), syncEvents those of live
		// frames after it: only the one that changed, once. (It comes in
		// the catch-up, or live when the read horizon had not passed its
		// commit yet: other transactions on the database hold it back.)
		const stats = await b.page.evaluate(() => window.board.view.stats);
		t.diagnostic(`after the reload: ${JSON.stringify(stats)}`);
		assert.equal(stats.fetched + stats.syncEvents, 1,
			`fetched ${stats.fetched} of ${held} artifacts and ${stats.syncEvents} live after the reload`);
		assert.deepEqual(await snapshot(b.page), await snapshot(a.page));
		assert.deepEqual(await drawn(b.page), await drawn(a.page));
		assert.deepEqual(a.errors, []);
		assert.deepEqual(b.errors, []);

		if (process.env.COMB_BOARD_SCREENSHOT) {
			const height = await b.page.evaluate(() => Math.ceil(document.querySelector('footer').getBoundingClientRect().bottom) + 16);
			await b.page.screenshot({ path: process.env.COMB_BOARD_SCREENSHOT, clip: { x: 0, y: 0, width: 1100, height } });
		}
	});

	test('two tabs of one browser share one connection; closing the leading tab keeps the other live', async (t) => {
		const sockets = async () => (await scrapeMetrics(stack.url)).value('comb_ws_connections');
		const base = await sockets();
		const context = await browser.newContext({ viewport: { width: 1100, height: 600 } });
		context.setDefaultTimeout(5000);
		const errors = [];
		const open = async () => {
			const page = await context.newPage();
			page.on('pageerror', (err) => errors.push(err.message));
			await page.goto(`${board.url}?relay=${stack.url}&channel=${alpha}`);
			await waitLive(page);
			return page;
		};
		try {
			const first = await open();
			const second = await open();
			const roles = await Promise.all([first, second].map((p) => p.evaluate(() => window.board.view.role)));
			assert.deepEqual(roles, ['leader', 'follower']);
			await eventually(sockets, base + 1, 'one WebSocket for the two tabs');
			assert.deepEqual(await snapshot(second), await snapshot(first));

			// the follower writes through the leader; the other browser sees it
			await second.fill('#new-title', 'Written in the second tab');
			await second.press('#new-title', 'Enter');
			await card(second, 'Written in the second tab').waitFor();
			await card(a.page, 'Written in the second tab').waitFor();
			await card(first, 'Written in the second tab').waitFor();
			await eventually(() => second.evaluate(() => window.board.view.pending), 0, 'sent by the leader');

			// the leading tab closes: the other takes over from the store
			const held = (await snapshot(second)).length;
			await first.close();
			await second.waitForFunction(() => window.board.view.role === 'leader', null, { timeout: 10000 });
			await waitLive(second);
			const stats = await second.evaluate(() => window.board.view.stats);
			t.diagnostic(`after the takeover: ${JSON.stringify(stats)} (${held} tasks held)`);
			assert.equal(stats.resets, 0);
			assert.ok(stats.fetched < held, `the new leader fetched ${stats.fetched} of ${held}: no full re-read`);
			await card(a.page, 'Fix the payment timeout today').dragTo(column(a.page, 'done'));
			await column(second, 'done').locator('.card', { hasText: 'Fix the payment timeout today' })
				.waitFor({ timeout: OTHER_PAGE_MS });
			assert.deepEqual(await snapshot(second), await snapshot(a.page));
			await eventually(sockets, base + 1, 'still one WebSocket for the tab left');
			assert.deepEqual(errors, []);
		} finally {
			await context.close();
		}
	});

	test('a NIP-07 extension\'s key signs when present; its refusal is status unauthorized, not an error', async () => {
		const ext = newKey();
		const context = await browser.newContext({ viewport: { width: 1100, height: 600 } });
		context.setDefaultTimeout(5000);
		let allow = true;
		// the extension: window.nostr, signing in this process
		await context.exposeFunction('testExtensionSign', (template) => {
			if (!allow)
				throw new Error('the user denied it');
			return finalizeEvent(template, ext.sk);
		});
		await context.addInitScript((pk) => {
			window.nostr = { getPublicKey: async () => pk, signEvent: (t) => window.testExtensionSign(t) };
		}, ext.pk);
		const page = await context.newPage();
		const errors = [];
		page.on('pageerror', (err) => errors.push(err.message));
		try {
			await page.goto(`${board.url}?relay=${stack.url}&channel=${alpha}`);
			await waitLive(page);
			assert.equal(await page.locator('#pubkey').getAttribute('data-pubkey'), ext.pk);
			assert.equal(await page.locator('#signer').isVisible(), true);
			assert.equal(await page.locator('#signer').inputValue(), 'extension');
			await page.fill('#new-title', 'Signed by the extension');
			await page.press('#new-title', 'Enter');
			await card(a.page, 'Signed by the extension').waitFor({ timeout: OTHER_PAGE_MS });
			assert.equal(await card(a.page, 'Signed by the extension').getAttribute('data-author'), ext.pk);

			// the user denies: the next connection's challenge is refused
			allow = false;
			await context.setOffline(true);
			await page.waitForFunction(() => window.board.view.status === 'offline');
			await context.setOffline(false);
			await page.waitForFunction(() => window.board.view.status === 'unauthorized', null, { timeout: 10000 });
			assert.equal(await page.locator('#status').textContent(), 'unauthorized');
			// the user allows it and clicks the status: live again
			allow = true;
			await page.locator('#status').click();
			await waitLive(page);
			assert.deepEqual(errors, []);
		} finally {
			await context.close();
		}
	});
});
