// The declarations match the code: tsc checks a typed use of every entry
// point (test/types/usage.ts, strict), and every class and function that
// index.d.ts, file-store.d.ts and react.d.ts declare exists in the module
// with each declared method, and every export of the modules is declared.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import ts from 'typescript';

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsc = path.resolve(pkg, '../../node_modules/typescript/bin/tsc');

test('tsc accepts a strict typed use of every entry point', async () => {
	await promisify(execFile)(process.execPath, [tsc, '-p', pkg]).catch((err) => {
		assert.fail(`tsc -p clients/js:\n${err.stdout}${err.stderr}`);
	});
});

// {name: {kind: 'class' | 'function', methods: [...]}} declared in file.
function declared(file) {
	const source = ts.createSourceFile(file, ts.sys.readFile(file), ts.ScriptTarget.ES2022, true);
	const out = {};
	for (const node of source.statements) {
		const exported = node.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
		if (!exported || !node.name)
			continue;
		if (ts.isClassDeclaration(node)) {
			const methods = node.members.filter((m) => ts.isMethodDeclaration(m)).map((m) => m.name.getText(source));
			out[node.name.text] = { kind: 'class', methods: [...new Set(methods)] };
		} else if (ts.isFunctionDeclaration(node)) {
			out[node.name.text] = { kind: 'function', methods: [] };
		}
	}
	return out;
}

for (const [dts, js] of [['index.d.ts', 'index.js'], ['file-store.d.ts', 'src/file-store.js'], ['react.d.ts', 'react.js']]) {
	test(`${dts} declares what ${js} exports, with the methods its classes have`, async () => {
		const mod = await import(path.join(pkg, js));
		const decl = declared(path.join(pkg, dts));
		assert.deepEqual(Object.keys(decl).sort(), Object.keys(mod).filter((k) => typeof mod[k] === 'function').sort());
		for (const [name, { kind, methods }] of Object.entries(decl)) {
			assert.equal(typeof mod[name], 'function', name);
			if (kind !== 'class')
				continue;
			for (const m of methods)
				assert.equal(typeof mod[name].prototype[m], 'function', `${name}.${m} is declared but not in the code`);
		}
	});
}

test('npm pack takes the modules, declarations, license and readme, and no tests', async () => {
	const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: pkg });
	const [packed] = JSON.parse(stdout);
	const files = packed.files.map((f) => f.path);
	for (const f of ['LICENSE', 'README.md', 'index.js', 'index.d.ts', 'file-store.d.ts', 'react.js', 'react.d.ts',
		'src/view.js', 'src/outbox.js', 'src/tabs.js', 'src/file-store.js'])
		assert.ok(files.includes(f), `${f} is packed`);
	assert.ok(files.every((f) => !f.startsWith('test/') && f !== 'tsconfig.json'), files.join(' '));
	const meta = JSON.parse(await import('node:fs/promises').then((fs) => fs.readFile(path.join(pkg, 'package.json'), 'utf8')));
	assert.notEqual(meta.license, 'UNLICENSED');
	assert.equal(meta.exports['./react'].types, './react.d.ts');
});
