#!/usr/bin/env node
// Open one page in Debian's headless chromium through playwright-core and
// report what a test needs to assert: console errors, page errors, failed
// requests, and how many elements match each --count selector. Optionally
// waits for a selector, emulates dark mode or print, and takes a screenshot.
//
//   check_page.js URL [--wait SELECTOR] [--count SELECTOR]... [--screenshot FILE]
//                 [--dark] [--print] [--timeout MS] [--width W --height H]
//                 [--eval JS] [--do ACTION]... [--credentials USER:PASS]
//                 [--requests] [--paint]
//
// --do runs steps in order, after --wait and before --count and --eval:
//   wait:SELECTOR      wait until an element matches
//   waitjs:JS          wait until the expression is truthy (polled)
//   click:SELECTOR     click the first match
//   select:SELECTOR=V  choose option V of a <select>
//   fill:SELECTOR=V    type V into an input
//   eval:JS            evaluate; the result goes to "steps" in the output
//   sleep:MS           wait MS milliseconds
//   screenshot:FILE    a full-page screenshot at this point
//   drag:SELECTOR=F1,F2  press at fraction F1 of the element's width, drag
//                      to F2, release
//   viewport:WxH       resize the viewport (a phone: 390x844)
//   scheme:dark|light  switch prefers-color-scheme
// --credentials answers HTTP Basic challenges; --requests lists every
// request's method, URL and response status ("requests"); --paint reports
// the page's first paint, first contentful paint, DOMContentLoaded and load,
// in ms from navigation start (Chromium's performance timing, "paint").
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
const opt = { counts: [], timeout: 15000, width: 1280, height: 900, evals: [], steps: [] };
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
	else if (a === '--do') opt.steps.push(need());
	else if (a === '--credentials') opt.credentials = need();
	else if (a === '--requests') opt.requests = true;
	else if (a === '--paint') opt.paint = true;
	else if (a.startsWith('--')) usage(`unknown option ${a}`);
	else if (opt.url) usage(`a second URL ${a}`);
	else opt.url = a;
}
if (!opt.url) usage('no URL given');
if (!/^(https?|file):/.test(opt.url)) opt.url = 'file://' + path.resolve(opt.url);

const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';

// One --do step on `page`; what an eval: step returns goes to out.steps.
async function runStep(page, step, out) {
	const colon = step.indexOf(':');
	if (colon < 0) usage(`--do ${step}: expected ACTION:ARGUMENT`);
	const action = step.slice(0, colon);
	const arg = step.slice(colon + 1);
	// SELECTOR=VALUE: at the first '=' (a value may hold '=', a token's
	// padding), or the last for drag (its value never does, a selector may).
	const split = (last) => {
		const eq = last ? arg.lastIndexOf('=') : arg.indexOf('=');
		if (eq < 0) usage(`--do ${step}: expected SELECTOR=VALUE`);
		return [arg.slice(0, eq), arg.slice(eq + 1)];
	};
	if (action === 'wait') await page.waitForSelector(arg, { timeout: opt.timeout });
	else if (action === 'waitjs') {
		// Polled from here: page.evaluate of a string is the debugger's,
		// which a page's CSP allows; waitForFunction compiles the string in
		// the page and trips a CSP without 'unsafe-eval'.
		const until = Date.now() + opt.timeout;
		while (!(await page.evaluate(arg).catch(() => false))) {
			if (Date.now() > until) throw new Error(`--do ${step}: still false after ${opt.timeout} ms`);
			await new Promise((r) => setTimeout(r, 50));
		}
	}
	else if (action === 'click') await page.click(arg, { timeout: opt.timeout });
	else if (action === 'select') { const [sel, v] = split(); await page.selectOption(sel, v, { timeout: opt.timeout }); }
	else if (action === 'fill') { const [sel, v] = split(); await page.fill(sel, v, { timeout: opt.timeout }); }
	else if (action === 'eval') out.steps.push(await page.evaluate(arg));
	else if (action === 'sleep') await page.waitForTimeout(Number(arg));
	else if (action === 'screenshot') await page.screenshot({ path: arg, fullPage: true });
	else if (action === 'drag') {
		// drag:SELECTOR=F1,F2 — press at F1 of the element's width, at
		// half its height, move to F2, release (a zoom on a chart).
		const [sel, fr] = split(true);
		const [f1, f2] = fr.split(',').map(Number);
		const target = page.locator(sel).first();
		await target.scrollIntoViewIfNeeded({ timeout: opt.timeout });
		const box = await target.boundingBox();
		if (!box || !isFinite(f1) || !isFinite(f2)) usage(`--do ${step}: no box, or not F1,F2`);
		const y = box.y + box.height / 2;
		await page.mouse.move(box.x + box.width * f1, y);
		await page.mouse.down();
		await page.mouse.move(box.x + box.width * f2, y, { steps: 8 });
		await page.mouse.up();
	} else if (action === 'viewport') {
		const m = /^(\d+)x(\d+)$/.exec(arg);
		if (!m) usage(`--do ${step}: expected WIDTHxHEIGHT`);
		await page.setViewportSize({ width: Number(m[1]), height: Number(m[2]) });
	} else if (action === 'scheme') {
		if (arg !== 'dark' && arg !== 'light') usage(`--do ${step}: dark or light`);
		await page.emulateMedia({ colorScheme: arg });
	}
	else usage(`--do ${step}: unknown action ${action}`);
}

(async () => {
	const out = { url: opt.url, console_errors: [], page_errors: [], failed_requests: [], counts: {}, evals: [], steps: [] };
	if (opt.requests) out.requests = [];
	let browser;
	try {
		browser = await chromium.launch({
			executablePath,
			headless: true,
			args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
		});
		const ctxOpts = {
			viewport: { width: opt.width, height: opt.height },
			colorScheme: opt.dark ? 'dark' : 'light',
		};
		if (opt.credentials) {
			const c = opt.credentials.indexOf(':');
			if (c < 0) usage('--credentials needs USER:PASS');
			ctxOpts.httpCredentials = { username: opt.credentials.slice(0, c), password: opt.credentials.slice(c + 1) };
		}
		const page = await browser.newPage(ctxOpts);
		if (opt.requests)
			page.on('response', (r) => out.requests.push({ method: r.request().method(), url: r.url(), status: r.status() }));
		page.on('console', (m) => {
			if (m.type() === 'error') out.console_errors.push(m.text());
		});
		page.on('pageerror', (e) => out.page_errors.push(String(e)));
		page.on('requestfailed', (r) => out.failed_requests.push(`${r.url()}: ${r.failure() && r.failure().errorText}`));
		const resp = await page.goto(opt.url, { timeout: opt.timeout, waitUntil: 'load' });
		out.status = resp ? resp.status() : null;
		if (opt.print) await page.emulateMedia({ media: 'print' });
		if (opt.wait) await page.waitForSelector(opt.wait, { timeout: opt.timeout });
		for (const step of opt.steps) await runStep(page, step, out);
		if (opt.paint)
			out.paint = await page.evaluate(() => {
				const p = {};
				for (const e of performance.getEntriesByType('paint')) p[e.name.replace(/-/g, '_')] = e.startTime;
				const n = performance.getEntriesByType('navigation')[0];
				if (n) {
					p.dom_content_loaded = n.domContentLoadedEventEnd;
					p.load = n.loadEventEnd;
					p.transfer_bytes = n.transferSize + performance.getEntriesByType('resource')
						.reduce((s, r) => s + r.transferSize, 0);
				}
				return p;
			});		for (const sel of opt.counts) out.counts[sel] = await page.locator(sel).count();
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
