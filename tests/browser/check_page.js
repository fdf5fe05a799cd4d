#!/usr/bin/env node
// Open one page in Debian's headless chromium through playwright-core and
// report what a test needs to assert: console errors, page errors, failed
// requests, and how many elements match each --count selector. Optionally
// waits for a selector, emulates dark mode or print, and takes a screenshot.
//
//   check_page.js URL [--wait SELECTOR] [--count SELECTOR]... [--screenshot FILE]
//                 [--dark] [--print] [--timeout MS] [--width W --height H]
//                 [--eval JS]
//
// URL is http(s):// or a file path (opened as file://). Prints one JSON
// object on stdout; exits 0 when the page loaded (the caller asserts on the
// JSON), 2 on bad arguments, 1 when the page could not be loaded or a
// --wait selector never appeared.
'use strict';
const path = require('path');
const { chromium } = require('playwright-core');

function usage(msg) {
	process.stderr.write(`check_page.js: ${msg}\n`);
	process.exit(2);
}

const args = process.argv.slice(2);
const opt = { counts: [], timeout: 15000, width: 1280, height: 900, evals: [] };
for (let i = 0; i < args.length; i++) {
	const a = args[i];
	const need = () => {
		if (i + 1 >= args.length) usage(`${a} needs a value`);
		return args[++i];
	};
	if (a === '--wait') opt.wait = need();
	else if (a === '--count') opt.counts.push(need());
	else if (a === '--screenshot') opt.screenshot = need();
	else if (a === '--dark') opt.dark = true;
	else if (a === '--print') opt.print = true;
	else if (a === '--timeout') opt.timeout = Number(need());
	else if (a === '--width') opt.width = Number(need());
	else if (a === '--height') opt.height = Number(need());
	else if (a === '--eval') opt.evals.push(need());
	else if (a.startsWith('--')) usage(`unknown option ${a}`);
	else if (opt.url) usage(`a second URL ${a}`);
	else opt.url = a;
}
if (!opt.url) usage('no URL given');
if (!/^(https?|file):/.test(opt.url)) opt.url = 'file://' + path.resolve(opt.url);

const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';

(async () => {
	const out = { url: opt.url, console_errors: [], page_errors: [], failed_requests: [], counts: {}, evals: [] };
	let browser;
	try {
		browser = await chromium.launch({
			executablePath,
			headless: true,
			args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
		});
		const page = await browser.newPage({
			viewport: { width: opt.width, height: opt.height },
			colorScheme: opt.dark ? 'dark' : 'light',
		});
		page.on('console', (m) => {
			if (m.type() === 'error') out.console_errors.push(m.text());
		});
		page.on('pageerror', (e) => out.page_errors.push(String(e)));
		page.on('requestfailed', (r) => out.failed_requests.push(`${r.url()}: ${r.failure() && r.failure().errorText}`));
		const resp = await page.goto(opt.url, { timeout: opt.timeout, waitUntil: 'load' });
		out.status = resp ? resp.status() : null;
		if (opt.print) await page.emulateMedia({ media: 'print' });
		if (opt.wait) await page.waitForSelector(opt.wait, { timeout: opt.timeout });
		for (const sel of opt.counts) out.counts[sel] = await page.locator(sel).count();
		for (const js of opt.evals) out.evals.push(await page.evaluate(js));
		out.title = await page.title();
		if (opt.screenshot) await page.screenshot({ path: opt.screenshot, fullPage: true });
		process.stdout.write(JSON.stringify(out) + '\n');
		await browser.close();
		process.exit(0);
	} catch (e) {
		out.error = String(e && e.message ? e.message : e);
		process.stdout.write(JSON.stringify(out) + '\n');
		if (browser) await browser.close().catch(() => {});
		process.exit(1);
	}
})();
