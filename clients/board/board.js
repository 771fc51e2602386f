// The comb task board: artifacts of type demo.task in the community's
// channels, in columns by their `status` tag, through comb-client only.
//
// The relay is the page's own origin, or ?relay=URL. ?channel=UUID selects
// a channel (an unlisted one too); otherwise the page lists the channels
// it can read. It signs with a NIP-07 browser extension's key
// (window.nostr) when one is present, unless the user picks this browser's
// own key, whose secret stays in localStorage. The view persists in
// IndexedDB, so a reload starts from it and reads only what changed; the
// tabs of one browser share it (one leads and holds the connection), and
// writes go through its outbox: shown at once as pending, kept while
// offline, sent when the network is back.

import { CombClient, tagValue } from 'comb-client';

const TYPE = 'demo.task';
const STATUSES = ['open', 'doing', 'done'];
const KEY_ITEM = 'comb-board-key';
const SIGNER_ITEM = 'comb-board-signer';   // 'extension' or 'local'


const params = new URLSearchParams(location.search);
const relay = new URL(params.get('relay') ?? location.origin).origin;
const $ = (sel, el = document) => el.querySelector(sel);

function hex(bytes) {
	return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

// This browser's key: made once, kept in localStorage.
function secretKey() {
	let sk = localStorage.getItem(KEY_ITEM);
	if (!/^[0-9a-f]{64}$/.test(sk ?? '')) {
		sk = hex(crypto.getRandomValues(new Uint8Array(32)));
		localStorage.setItem(KEY_ITEM, sk);
	}
	return sk;
}

let messageTimer = null;
function showMessage(text) {
	const el = $('#message');
	el.textContent = text;
	el.hidden = false;
	clearTimeout(messageTimer);
	messageTimer = setTimeout(() => {
		el.hidden = true;
	}, 6000);
}

// The channels to show, [{h, name}]: ?channel= and every channel the key
// can read (their creation and edit events name them). The list is cached
// for a start without the network.
async function loadChannels(client) {
	const cacheItem = `comb-board-channels ${relay}`;
	let list;
	try {
		const events = await client.query({ kinds: [9007, 9002], limit: 1000 });
		const names = new Map();
		for (const ev of events.sort((a, b) => a.created_at - b.created_at)) {
			const h = tagValue(ev, 'h');
			const name = tagValue(ev, 'name');
			if (h && (ev.kind === 9007 || name !== undefined))
				names.set(h, name ?? names.get(h) ?? h.slice(0, 8));
		}
		list = [...names].map(([h, name]) => ({ h, name }));
		localStorage.setItem(cacheItem, JSON.stringify(list));
	} catch (err) {
		list = JSON.parse(localStorage.getItem(cacheItem) ?? 'null');
		if (!list)
			throw err;
		showMessage(`offline: showing the channels known before (${err.message})`);
	}
	const wanted = params.get('channel');
	if (wanted && !list.some((c) => c.h === wanted))
		list.push({ h: wanted, name: wanted.slice(0, 8) });
	return list.sort((a, b) => a.name.localeCompare(b.name) || a.h.localeCompare(b.h));
}

function statusOf(ev) {
	const s = tagValue(ev, 'status');
	return STATUSES.includes(s) ? s : 'open';
}

function byTitle(a, b) {
	return tagValue(a, 'title').localeCompare(tagValue(b, 'title')) ||
		tagValue(a, 'd').localeCompare(tagValue(b, 'd'));
}

class Board {
	constructor(client, pubkey, channels) {
		this.pubkey = pubkey;
		this.channels = channels;
		const stored = localStorage.getItem('comb-board-channel');
		const first = [params.get('channel'), stored].find((h) => channels.some((c) => c.h === h));
		this.selected = first ?? channels[0].h;
		this.cards = new Map(); // d -> <li>
		this.editing = null;    // d whose title is being edited
		const ids = channels.map((c) => c.h);
		// the tabs of this browser share one view: one connection, one store
		const name = `comb-board ${relay} ${pubkey} ${[...ids].sort().join(',')}`;
		this.view = client.artifacts({ channels: ids, types: [TYPE], tabs: name });
		this.view.on('change', () => this.render());
		this.view.on('pending', () => {
			this.render();
			this.showStatus(this.view.status);
		});
		this.view.on('status', (s) => this.showStatus(s));
		this.view.on('error', (err) => {
			// a write refused for good was rolled back: say so
			if (err.entry)
				showMessage(err.message);
			else
				console.debug('view:', err.message);
		});
		this.view.ready.catch((err) => showMessage(err.message));
		this.showStatus(this.view.status);
		this.bind();
	}

	showStatus(status) {
		const el = $('#status');
		el.textContent = status;
		el.dataset.status = status;
		el.title = status === 'unauthorized' ? 'The signer declined: click to ask again' : '';
		const pending = $('#pending');
		pending.textContent = this.view.pending ? `${this.view.pending} pending` : '';
		pending.hidden = !this.view.pending;
	}

	// Runs a write of the view's outbox; shows why when it cannot be made.
	write(promise) {
		promise.catch((err) => showMessage(err.message));
	}

	bind() {
		const select = $('#channel');
		select.replaceChildren(...this.channels.map((c) => new Option(c.name, c.h, false, c.h === this.selected)));
		$('#status').addEventListener('click', () => this.view.retry());
		select.addEventListener('change', () => {
			this.selected = select.value;
			localStorage.setItem('comb-board-channel', this.selected);
			this.render();
		});
		$('#create').addEventListener('submit', (e) => {
			e.preventDefault();
			const input = $('#new-title');
			const title = input.value.trim();
			if (!title)
				return;
			input.value = '';
			this.view.create({ h: this.selected, type: TYPE, title, tags: [['status', 'open']] })
				.catch((err) => {
					input.value = title;
					showMessage(err.message);
				});
		});
		for (const column of document.querySelectorAll('.column')) {
			column.addEventListener('dragover', (e) => {
				if (e.dataTransfer.types.includes('application/x-comb-d')) {
					e.preventDefault();
					e.dataTransfer.dropEffect = 'move';
					column.classList.add('over');
				}
			});
			column.addEventListener('dragleave', (e) => {
				if (!column.contains(e.relatedTarget))
					column.classList.remove('over');
			});
			column.addEventListener('drop', (e) => {
				e.preventDefault();
				column.classList.remove('over');
				this.setStatus(e.dataTransfer.getData('application/x-comb-d'), column.dataset.status);
			});
		}
	}

	// Writes go through the view's outbox: when another writer got there
	// first, the outbox makes the same change on their revision.
	setStatus(d, status) {
		const ev = this.view.get(d);
		if (ev && statusOf(ev) !== status)
			this.write(this.view.update(d, { tags: { status } }));
	}

	card(ev) {
		const d = tagValue(ev, 'd');
		let li = this.cards.get(d);
		if (!li) {
			li = document.createElement('li');
			li.className = 'card';
			li.draggable = true;
			li.tabIndex = 0;
			li.dataset.d = d;
			const title = document.createElement('span');
			title.className = 'title';
			title.title = 'Click to edit';
			title.addEventListener('click', () => this.edit(d));
			const move = document.createElement('select');
			move.className = 'move';
			move.setAttribute('aria-label', 'Move to channel');
			move.addEventListener('change', () => {
				const to = move.value;
				move.value = '';
				this.write(this.view.move(d, to));
			});
			const del = document.createElement('button');
			del.className = 'delete';
			del.type = 'button';
			del.title = 'Delete';
			del.textContent = '×';
			del.addEventListener('click', () => this.write(this.view.delete(d)));
			const actions = document.createElement('div');
			actions.className = 'actions';
			actions.append(move, del);
			li.append(title, actions);
			li.addEventListener('dragstart', (e) => {
				e.dataTransfer.setData('application/x-comb-d', d);
				e.dataTransfer.effectAllowed = 'move';
				li.classList.add('dragging');
			});
			li.addEventListener('dragend', () => li.classList.remove('dragging'));
			li.addEventListener('keydown', (e) => {
				if (e.target !== li || (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight'))
					return;
				const cur = this.view.get(d);
				const i = STATUSES.indexOf(statusOf(cur)) + (e.key === 'ArrowLeft' ? -1 : 1);
				if (i >= 0 && i < STATUSES.length)
					this.setStatus(d, STATUSES[i]);
			});
			this.cards.set(d, li);
		}
		li.dataset.id = ev.id;
		li.dataset.author = ev.pubkey;
		li.classList.toggle('pending', ev.pending === true);
		if (this.editing !== d)
			$('.title', li).textContent = tagValue(ev, 'title');
		const move = $('.move', li);
		const h = tagValue(ev, 'h');
		if (move.dataset.h !== h) {
			move.dataset.h = h;
			move.replaceChildren(new Option('move to…', ''),
				...this.channels.filter((c) => c.h !== h).map((c) => new Option(c.name, c.h)));
		}
		return li;
	}

	edit(d) {
		const li = this.cards.get(d);
		const ev = this.view.get(d);
		if (!li || !ev || this.editing === d)
			return;
		this.editing = d;
		const span = $('.title', li);
		const input = document.createElement('input');
		input.className = 'edit';
		input.value = tagValue(ev, 'title');
		input.maxLength = 512;
		let done = false;
		const finish = (save) => {
			if (done)
				return;
			done = true;
			this.editing = null;
			const title = input.value.trim();
			input.replaceWith(span);
			const cur = this.view.get(d);
			if (cur)
				span.textContent = tagValue(cur, 'title');
			if (save && title && cur && title !== tagValue(cur, 'title')) {
				span.textContent = title;
				this.write(this.view.update(d, { title }));
			}
		};
		input.addEventListener('keydown', (e) => {
			if (e.key === 'Enter')
				finish(true);
			else if (e.key === 'Escape')
				finish(false);
		});
		input.addEventListener('blur', () => finish(true));
		span.replaceWith(input);
		input.focus();
		input.select();
	}

	render() {
		const columns = Object.fromEntries(STATUSES.map((s) => [s, []]));
		for (const ev of this.view.all()) {
			if (tagValue(ev, 'h') === this.selected)
				columns[statusOf(ev)].push(ev);
		}
		const shown = new Set();
		for (const status of STATUSES) {
			const column = $(`.column[data-status="${status}"]`);
			const els = columns[status].sort(byTitle).map((ev) => this.card(ev));
			for (const li of els)
				shown.add(li);
			const ul = $('.cards', column);
			const same = ul.children.length === els.length && els.every((li, i) => ul.children[i] === li);
			if (!same)
				ul.replaceChildren(...els);
			$('.count', column).textContent = String(els.length);
		}
		for (const [d, li] of this.cards) {
			if (!shown.has(li)) {
				li.remove();
				if (!this.view.get(d))
					this.cards.delete(d);
			}
		}
	}

	// What the board holds, for tests and the console: every task of every
	// channel, by d.
	snapshot() {
		return this.view.all().map((ev) => ({
			d: tagValue(ev, 'd'), h: tagValue(ev, 'h'), id: ev.id,
			title: tagValue(ev, 'title'), status: statusOf(ev), pending: ev.pending === true,
		})).sort((a, b) => a.d.localeCompare(b.d));
	}
}

// The signer: a NIP-07 extension's (window.nostr) unless the user chose
// this browser's own key, or the extension gives no key. Fills the key
// picker, shown only when there is a choice.
async function signer() {
	const picker = $('#signer');
	const ext = globalThis.nostr;
	if (!ext || typeof ext.signEvent !== 'function')
		return { secretKey: secretKey() };
	picker.hidden = false;
	picker.value = localStorage.getItem(SIGNER_ITEM) === 'local' ? 'local' : 'extension';
	picker.addEventListener('change', () => {
		localStorage.setItem(SIGNER_ITEM, picker.value);
		location.reload();
	});
	if (picker.value === 'local')
		return { secretKey: secretKey() };
	try {
		await ext.getPublicKey();
		return { signer: ext };
	} catch (err) {
		showMessage(`the extension gives no key (${err?.message ?? err}): using this browser's own`);
		picker.value = 'local';
		return { secretKey: secretKey() };
	}
}

async function main() {
	$('#relay').textContent = relay;
	const client = new CombClient({ url: relay, ...await signer() });
	const pubkey = await client.getPublicKey();
	const key = $('#pubkey');
	key.textContent = `${pubkey.slice(0, 8)}…${pubkey.slice(-4)}`;
	key.title = pubkey;
	key.dataset.pubkey = pubkey;
	let channels;
	for (let attempt = 0; !channels; attempt++) {
		try {
			channels = await loadChannels(client);
		} catch (err) {
			showMessage(`cannot list channels: ${err.message}; retrying`);
			await new Promise((r) => setTimeout(r, Math.min(30000, 1000 * 2 ** attempt)));
		}
	}
	if (channels.length === 0) {
		showMessage('No channel to show: this key can read no channel of the community. ' +
			'A community admin creates an open one (kind 9007), or open the page with ?channel=UUID.');
		return;
	}
	window.board = new Board(client, pubkey, channels);
	window.board.render();
}

main();
