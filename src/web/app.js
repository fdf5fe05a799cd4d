// gpulse dashboard: reads gpulsed's own API (the Prometheus query API, the
// diagnosis, alerts and profiling endpoints) and draws it with uPlot. A
// plain ES module served from the binary: no build step, nothing fetched
// from elsewhere (docs/internals/web.md).
//
// Tests and benchmarks read window.gpulseDash: what was requested, what
// each chart drew and when the first chart was drawn.

const $ = (id) => document.getElementById(id);
const AUTH_KEY = 'gpulse.auth';
const CLASSES = ['idle', 'compute_bound', 'memory_bound', 'pcie_bound', 'launch_bound', 'input_starved', 'mixed'];
const MAX_KERNEL_PROCESSES = 8;
const KERNELS_PER_PROCESS = 5;
const POINTS = 600; // target points per series: about one per pixel of a wide chart

// Each chart: one PromQL selector per series, all fetched in one query
// ({__name__=~"a|b"}), so a refresh costs one request per chart.
const CHARTS = [
	{ id: 'activity', title: 'Activity', unit: 'pct', min: 0, max: 100, series: [
		['gpulse_gpu_utilization_ratio', 'utilization'],
		['gpulse_gpu_sm_active_ratio', 'SM active'],
		['gpulse_gpu_sm_occupancy_ratio', 'SM occupancy'],
		['gpulse_gpu_tensor_active_ratio', 'tensor'],
		['gpulse_gpu_dram_bandwidth_ratio', 'DRAM bandwidth'],
	] },
	{ id: 'memory', title: 'Memory', unit: 'bytes', min: 0, series: [
		['gpulse_gpu_memory_used_bytes', 'used'],
		['gpulse_gpu_memory_total_bytes', 'total'],
	] },
	{ id: 'power', title: 'Power vs limit', unit: 'W', min: 0, series: [
		['gpulse_gpu_power_watts', 'power'],
		['gpulse_gpu_power_limit_watts', 'limit'],
	] },
	{ id: 'temperature', title: 'Temperature', unit: 'C', series: [
		['gpulse_gpu_temperature_celsius', 'GPU'],
		['gpulse_gpu_memory_temperature_celsius', 'memory'],
	] },
	// The max clocks are the card's identity, not stored history: the
	// title has them, from /api/v1/gpus.
	{ id: 'clocks', title: 'Clocks', unit: 'Hz', min: 0, series: [
		['gpulse_gpu_sm_clock_hertz', 'SM'],
		['gpulse_gpu_memory_clock_hertz', 'memory'],
	], note: (g) => g && g.max_sm_clock_hz ? `max SM ${scaled(g.max_sm_clock_hz, 'Hz')}, memory ${scaled(g.max_mem_clock_hz, 'Hz')}` : '' },
	{ id: 'pcie', title: 'PCIe', unit: 'Bps', min: 0, series: [
		['gpulse_gpu_pcie_tx_bytes_per_second', 'tx'],
		['gpulse_gpu_pcie_rx_bytes_per_second', 'rx'],
	] },
];

const dash = {
	gpus: [],          // /api/v1/gpus's list
	gpu: null,         // the picked GPU's index (a string, as the label)
	range: 900,        // seconds
	end: null,         // Unix seconds the window ends at; null: now
	live: true,
	charts: {},        // id -> {plot, query, start, end, step, points, last}
	requests: [],      // paths fetched, in order (bounded)
	drawnAt: null,     // performance.now() when the first chart drew data
	refreshes: 0,
	errors: [],
	storage: null,     // true: the store answers; else why not (a sentence)
	gen: 0,            // bumped when the view (GPU, range, end) changes
	busy: false,
};
window.gpulseDash = dash;

class AuthNeeded extends Error {}

// ---- the API --------------------------------------------------------------

function authHeaders() {
	const a = sessionStorage.getItem(AUTH_KEY);
	return a ? { Authorization: a } : {};
}

async function api(path) {
	if (dash.requests.length >= 500) dash.requests.splice(0, 100);
	dash.requests.push(path);
	const r = await fetch(path, { headers: authHeaders(), cache: 'no-store', credentials: 'same-origin' });
	if (r.status === 401) {
		showLogin(r.headers.get('WWW-Authenticate') || '');
		throw new AuthNeeded('credentials needed');
	}
	let body;
	try {
		body = await r.json();
	} catch (e) {
		throw new Error(`${path}: HTTP ${r.status}, not JSON`);
	}
	if (!r.ok || body.status !== 'success') {
		const e = new Error(`${path.split('?')[0]}: ${body.error || 'HTTP ' + r.status}`);
		e.status = r.status;
		e.detail = body.error || '';
		throw e;
	}
	return body.data;
}

const q = (s) => encodeURIComponent(s);
const sel = (name, gpu) => `${name}{gpu="${gpu}"}`;

async function queryRange(expr, start, end, step) {
	const d = await api(`/api/v1/query_range?query=${q(expr)}&start=${start}&end=${end}&step=${step}`);
	return d.result;
}

async function queryInstant(expr) {
	const d = await api(`/api/v1/query?query=${q(expr)}`);
	return d.result;
}

// ---- sign-in ----------------------------------------------------------------

function base64Utf8(s) {
	const bytes = new TextEncoder().encode(s);
	let bin = '';
	for (const b of bytes) bin += String.fromCharCode(b);
	return btoa(bin);
}

function showLogin(challenge) {
	const bearer = /bearer/i.test(challenge);
	const basic = /basic/i.test(challenge);
	$('login-token').hidden = !bearer;
	$('login-basic').hidden = !basic;
	$('login-why').textContent = sessionStorage.getItem(AUTH_KEY)
		? 'gpulsed refused these credentials; try again.'
		: `This gpulsed asks for ${[bearer && 'a bearer token', basic && 'a user and password'].filter(Boolean).join(' or ')}.`;
	$('login').hidden = false;
	$('main').hidden = true;
	stopTimer();
}

function signIn() {
	const token = $('token').value.trim();
	const user = $('user').value;
	if (!$('login-token').hidden && token) sessionStorage.setItem(AUTH_KEY, `Bearer ${token}`);
	else if (!$('login-basic').hidden && user) sessionStorage.setItem(AUTH_KEY, `Basic ${base64Utf8(user + ':' + $('password').value)}`);
	else return;
	$('token').value = '';
	$('password').value = '';
	$('login').hidden = true;
	$('main').hidden = false;
	$('signout').hidden = false;
	start();
}

function signOut() {
	sessionStorage.removeItem(AUTH_KEY);
	$('signout').hidden = true;
	location.reload();
}

// A token in the URL's fragment (/#token=...) signs in without the form: the
// fragment never reaches the server or its logs, and is removed at once.
function tokenFromFragment() {
	const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
	if (!m) return;
	let token = m[1];
	try {
		token = decodeURIComponent(token);
	} catch (e) {
		// not percent-encoded: taken as it is
	}
	sessionStorage.setItem(AUTH_KEY, `Bearer ${token}`);
	history.replaceState(null, '', location.pathname + location.search);
}

// ---- formatting -------------------------------------------------------------

function scaled(v, unit, digits = 3) {
	if (v == null || !isFinite(v)) return '–';
	const steps = unit === 'bytes' ? [[2 ** 40, 'TiB'], [2 ** 30, 'GiB'], [2 ** 20, 'MiB'], [2 ** 10, 'KiB']]
		: unit === 'Hz' ? [[1e9, 'GHz'], [1e6, 'MHz'], [1e3, 'kHz']]
		: unit === 'Bps' ? [[1e9, 'GB/s'], [1e6, 'MB/s'], [1e3, 'kB/s']] : [];
	for (const [f, u] of steps) if (Math.abs(v) >= f) return `${+(v / f).toPrecision(digits)} ${u}`;
	if (unit === 'pct') return `${+v.toFixed(1)}%`;
	if (unit === 'W') return `${+v.toFixed(1)} W`;
	if (unit === 'C') return `${+v.toFixed(0)} °C`;
	if (unit === 'Bps') return `${+v.toPrecision(digits)} B/s`;
	if (unit === 'bytes') return `${v} B`;
	if (unit === 'Hz') return `${v} Hz`;
	return `${+v.toPrecision(digits)}`;
}

function fmtTime(t, withDate) {
	const d = new Date(t * 1000);
	const p = (n) => String(n).padStart(2, '0');
	const hm = `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
	return withDate ? `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${hm}` : hm;
}

function fmtDuration(s) {
	if (s < 90) return `${Math.round(s)} s`;
	if (s < 5400) return `${Math.round(s / 60)} min`;
	if (s < 2 * 86400) return `${+(s / 3600).toFixed(1)} h`;
	return `${+(s / 86400).toFixed(1)} d`;
}

function cssVar(name) {
	return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

function el(tag, attrs, ...kids) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs || {})) {
		if (k === 'class') e.className = v;
		else if (k === 'text') e.textContent = v;
		else if (v != null) e.setAttribute(k, v);
	}
	for (const k of kids) if (k != null) e.append(k);
	return e;
}

// ---- time window --------------------------------------------------------------

// The view is the whole range (the charts' x axis and the timeline span it),
// but the points are asked for only where there is data: from the first
// sample in the range on. A history shorter than the range (a fresh store
// at 7 days) would otherwise get a step of range/POINTS, far over the
// 5-minute lookback, and draw one point or none. The step is a whole
// number of seconds giving about POINTS points over that part; the window
// ends on a multiple of it, so the last point drawn is the instant query's
// value at `end` (what a test compares). `first`: the first sample's time,
// or null (none in the range, or no store): then the whole range.
function windowFor(first) {
	const end0 = dash.end ?? Date.now() / 1000;
	const view0 = end0 - dash.range;
	const from0 = first != null && first > view0 && first < end0 ? first : view0;
	const step = Math.max(1, Math.ceil((end0 - from0) / POINTS));
	const end = Math.floor(end0 / step) * step;
	const from = end - Math.max(0, Math.ceil((end - from0) / step)) * step;
	return { start: end - dash.range, end, from, step, first: first != null && first < end0 ? first : null };
}

// When the range's data begins (the first sample of any GPU's
// gpulse_gpu_up), in two instant queries. First roughly: the earliest
// timestamp() seen by a subquery whose points are `res` apart (under the
// 5-minute lookback, so no stretch of data falls between two points),
// evaluated `res` past the end so the newest data has a point after it;
// the sample a point sees is at most `res` after the first (or, past raw
// retention, a 1-minute rollup read at its minute's start). Then, when
// that falls inside the range, exactly: the raw samples of the stretch
// around it. Returns Unix seconds (at or before the range's start when
// the data goes back that far), or null: no data, or no store. Never
// throws (a 401 is the next request's to show).
async function firstSample() {
	if (dash.storage !== true) return null;
	const end0 = Math.ceil(dash.end ?? Date.now() / 1000);
	const res = Math.min(240, Math.max(1, Math.ceil(dash.range / POINTS)));
	const instant = async (expr, t) => (await api(`/api/v1/query?query=${q(expr)}&time=${t}`)).result || [];
	try {
		const r = await instant(`min(min_over_time(timestamp(gpulse_gpu_up)[${dash.range + res}s:${res}s]))`, end0 + res);
		const rough = r[0] ? parseFloat(r[0].value[1]) : NaN;
		if (!isFinite(rough)) return null;
		if (rough <= end0 - dash.range) return rough;
		let first = Infinity;
		for (const s of await instant(`gpulse_gpu_up[${res + 62}s]`, Math.ceil(rough) + 61))
			for (const [t] of s.values) first = Math.min(first, t);
		return isFinite(first) ? first : rough - res;
	} catch (e) {
		return null;
	}
}

// A note on the view that stays until the view changes (the status line is
// rewritten by every refresh); '' hides it.
function notice(text) {
	$('notice').textContent = text;
	$('notice').hidden = !text;
}

// ---- GPU tiles ----------------------------------------------------------------

function meter(label, ratio, text, hot) {
	const pct = ratio == null || !isFinite(ratio) ? 0 : Math.max(0, Math.min(1, ratio)) * 100;
	const fill = el('div', { class: 'fill' + (hot ? ' hot' : '') });
	fill.style.width = `${pct}%`;
	return el('div', { class: 'meter' }, el('span', { text: label }), el('div', { class: 'track' }, fill),
		el('span', { class: 'val', text }));
}

// PCIe GB/s per lane and direction by generation (after encoding): the
// busier direction against the link's peak, as the diagnosis reads it.
const PCIE_LANE_GBPS = { 1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563 };
function pcieRatio(g, f) {
	const lane = PCIE_LANE_GBPS[g.pcie_max_gen];
	if (!lane || !g.pcie_max_width || f.gpm_pcie_rx == null) return null;
	return Math.max(f.gpm_pcie_rx, f.gpm_pcie_tx || 0) / (lane * 1e9 * g.pcie_max_width);
}

function classChip(c) {
	const chip = el('span', { class: 'cls', text: c ? c.replace('_', ' ') : 'no verdict yet' });
	chip.style.background = c ? cssVar(`--c-${c}`) : 'transparent';
	return chip;
}

function renderTiles(classes) {
	const box = $('gpus');
	box.replaceChildren();
	for (const g of dash.gpus) {
		const f = g.fields || {};
		const limit = f.power_limit;
		const maxSm = g.max_sm_clock_hz;
		const tile = el('div', { class: 'tile' + (String(g.gpu) === dash.gpu ? ' sel' : ''), 'data-gpu': g.gpu, tabindex: 0 },
			el('div', { class: 'name' }, el('span', { text: `GPU ${g.gpu}` }), el('span', { text: g.model || '' })));
		if (g.health !== 'up') tile.append(el('div', { class: 'down', text: `${g.health}${g.health_reason ? ': ' + g.health_reason : ''}` }));
		tile.append(
			meter('util', f.gpu_util, scaled(f.gpu_util * 100, 'pct')),
			meter('SM', f.gpm_sm, f.gpm_sm == null ? '–' : scaled(f.gpm_sm * 100, 'pct')),
			meter('tensor', f.gpm_tensor, f.gpm_tensor == null ? '–' : scaled(f.gpm_tensor * 100, 'pct')),
			meter('DRAM', f.gpm_dram, f.gpm_dram == null ? '–' : scaled(f.gpm_dram * 100, 'pct')),
			meter('memory', f.mem_used / f.mem_total, scaled(f.mem_used, 'bytes', 3), f.mem_used / f.mem_total >= 0.85),
			meter('power', limit ? f.power / limit : null, limit ? `${Math.round(f.power)}/${Math.round(limit)} W` : scaled(f.power, 'W'), limit && f.power / limit >= 0.95),
			meter('temp', f.temp == null ? null : f.temp / 100, scaled(f.temp, 'C'), f.temp >= 85),
			meter('SM clock', maxSm ? f.sm_clock / maxSm : null, scaled(f.sm_clock, 'Hz')),
			meter('PCIe', pcieRatio(g, f), f.gpm_pcie_rx == null ? '–' : `${scaled(Math.max(f.gpm_pcie_rx, f.gpm_pcie_tx || 0), 'Bps', 2)}`));
		tile.append(el('div', {}, classChip(classes[g.gpu])));
		tile.addEventListener('click', () => pickGpu(String(g.gpu)));
		tile.addEventListener('keydown', (e) => { if (e.key === 'Enter') pickGpu(String(g.gpu)); });
		box.append(tile);
	}
}

async function loadGpus() {
	// The current class per GPU (the stored verdict of the last window),
	// asked beside the GPUs: neither waits on the other. This query also
	// says whether the store answers: without one (no storage.path, or a
	// store that could not open) the history charts and the ALERTS series
	// are not asked for, and the page says why.
	const verdicts = queryInstant('gpulse_gpu_bottleneck == 1').then((r) => ({ r }), (e) => ({ e }));
	const d = await api('/api/v1/gpus');
	dash.gpus = d.gpus || [];
	const badge = $('source');
	badge.hidden = d.mode === 'nvml';
	badge.textContent = d.mode === 'replay' ? 'REPLAY of a recording' : d.mode === 'nvml' ? '' : 'no NVIDIA driver';
	const picker = $('gpu');
	const want = dash.gpus.map((g) => String(g.gpu));
	if ([...picker.options].map((o) => o.value).join() !== want.join()) {
		picker.replaceChildren(...dash.gpus.map((g) => el('option', { value: g.gpu, text: `GPU ${g.gpu} · ${g.model || ''}` })));
	}
	// A GPU the host does not have (a link from another host, or a card
	// gone): say so and show the first, rather than one silently for the
	// other; the URL then names the GPU shown. With no GPU listed yet
	// there is nothing to compare with.
	if (dash.gpu != null && want.length && !want.includes(dash.gpu)) {
		notice(`No GPU ${dash.gpu} on this host (its GPUs: ${want.join(', ')}); showing GPU ${want[0]}.`);
		dash.gpu = want[0];
		saveView();
	}
	if (dash.gpu == null) dash.gpu = want[0] ?? null;
	picker.value = dash.gpu ?? '';
	const classes = {};
	const v = await verdicts;
	if (v.e) {
		if (v.e instanceof AuthNeeded) throw v.e;
		dash.storage = v.e.status === 503 ? (v.e.detail || v.e.message) : true;
	} else {
		for (const r of v.r) classes[r.metric.gpu] = r.metric.class;
		dash.storage = true;
	}
	renderTiles(classes);
	renderTenants();
}

// ---- charts ---------------------------------------------------------------------

// Six colours from the theme, then more around the hue circle, so that
// eight or more GPUs on one chart stay apart.
function seriesColors() {
	const base = ['--s1', '--s2', '--s3', '--s4', '--s5', '--s6'].map(cssVar);
	const light = document.documentElement.dataset.scheme !== 'dark';
	const more = Array.from({ length: 10 }, (_, i) => `hsl(${(i * 137.5 + 20) % 360} 65% ${light ? 42 : 65}%)`);
	return [...base, ...more];
}

function chartBox(def) {
	let box = document.querySelector(`.chart[data-chart="${def.id}"]`);
	if (box) return box;
	box = el('div', { class: 'chart', 'data-chart': def.id },
		el('h3', {}, el('span', { text: def.title }), el('span', { class: 'now' })),
		el('div', { class: 'plot' }));
	$('charts').append(box);
	return box;
}

function axisOpts(unit) {
	const stroke = cssVar('--muted');
	const grid = { stroke: cssVar('--grid'), width: 1 };
	return [
		{ stroke, grid, ticks: grid, space: 80 },
		{ stroke, grid, ticks: grid, size: 78, values: (u, vals) => vals.map((v) => scaled(v, unit, 3)) },
	];
}

// Builds (or rebuilds) the uPlot for `def` with `names` series and draws
// `data`; keeps the plot when its series are unchanged, as uPlot redraws
// new data in place.
function drawChart(def, names, data, win) {
	const box = chartBox(def);
	const plotBox = box.querySelector('.plot');
	let c = dash.charts[def.id];
	const width = Math.max(200, plotBox.clientWidth || 300);
	const key = names.join('\u0001') + '|' + document.documentElement.dataset.scheme;
	if (!c || c.key !== key) {
		if (c && c.plot) c.plot.destroy();
		plotBox.replaceChildren();
		const colors = seriesColors();
		// The x axis is the whole range, whatever part of it has data.
		const view = { start: win.start, end: win.end };
		const opts = {
			width, height: 190,
			legend: { show: true, live: true },
			// Dragging across a chart zooms every chart (and the
			// timeline) to that span: the window is the view, not the plot's.
			cursor: { drag: { x: true, y: false, setScale: false } },
			hooks: { setSelect: [(u) => {
				if (u.select.width < 3) return;
				const a = u.posToVal(u.select.left, 'x');
				const b = u.posToVal(u.select.left + u.select.width, 'x');
				u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
				zoomTo(a, b);
			}] },
			scales: { x: { time: true, range: () => [view.start, view.end] }, y: { range: (u, lo, hi) => [def.min ?? lo, def.max ?? (hi > lo ? hi * 1.05 : lo + 1)] } },
			axes: axisOpts(def.unit),
			series: [{ value: (u, v) => (v == null ? '–' : fmtTime(v, dash.range > 86400)) },
				...names.map((n, i) => ({ label: n, stroke: colors[i % colors.length], width: 1.5,
					value: (u, v) => scaled(v, def.unit), spanGaps: false }))],
		};
		c = dash.charts[def.id] = { key, view, plot: new uPlot(opts, data, plotBox) };
	} else {
		Object.assign(c.view, { start: win.start, end: win.end });
		c.plot.setData(data);
	}
	Object.assign(c, win, { series: names, points: data.slice(1).map((s) => s.filter((v) => v != null).length) });
	if (dash.drawnAt == null && c.points.some((n) => n > 0)) dash.drawnAt = performance.now();
}

// The range query's matrix -> uPlot's columns on the window's grid.
function toColumns(result, win, keyOf) {
	const n = Math.round((win.end - win.from) / win.step) + 1;
	const xs = Array.from({ length: n }, (_, i) => win.from + i * win.step);
	const cols = new Map();
	for (const r of result) {
		const k = keyOf(r.metric);
		if (!cols.has(k)) cols.set(k, new Array(n).fill(null));
		const col = cols.get(k);
		for (const [t, v] of r.values) {
			const i = Math.round((t - win.from) / win.step);
			if (i >= 0 && i < n) col[i] = parseFloat(v);
		}
	}
	return { xs, cols };
}

function showNow(def, order, cols, win, scale) {
	const now = document.querySelector(`.chart[data-chart="${def.id}"] .now`);
	now.replaceChildren();
	const last = {};
	for (const [k, label] of order) {
		const col = cols.get(k);
		if (!col) continue;
		const v = col[col.length - 1];
		if (v == null) continue;
		last[k] = v;
		now.append(el('span', { 'data-metric': k, 'data-t': win.end, 'data-v': v, text: `${label} ${scaled(v * scale, def.unit)}` }), ' ');
	}
	dash.charts[def.id].last = last;
}

async function loadChart(def, win) {
	const gpu = dash.gpu;
	const gen = dash.gen;
	const names = def.series.map((s) => s[0]);
	const expr = def.expr ? def.expr(gpu) : `{__name__=~"${names.join('|')}",gpu="${gpu}"}`;
	const result = await queryRange(expr, win.from, win.end, win.step);
	if (gen !== dash.gen) return; // the view changed meanwhile: its own refresh draws it
	const keyOf = def.keyOf || ((m) => m.__name__);
	const { xs, cols } = toColumns(result, win, keyOf);
	const scale = def.unit === 'pct' && !def.expr ? 100 : 1;
	const order = def.order ? def.order(cols) : def.series.filter(([n]) => cols.has(n));
	const box = chartBox(def);
	if (def.note) {
		const g = dash.gpus.find((x) => String(x.gpu) === gpu);
		const note = def.note(g);
		box.querySelector('h3 span').textContent = note ? `${def.title} (${note})` : def.title;
	}
	if (order.length === 0) {
		if (dash.charts[def.id]) dash.charts[def.id].plot.destroy();
		delete dash.charts[def.id];
		box.querySelector('.plot').replaceChildren(el('div', { class: 'empty', text: 'no samples in this range (not supported by this GPU, or not sampled yet)' }));
		box.querySelector('.now').replaceChildren();
		return;
	}
	const data = [xs, ...order.map(([k]) => cols.get(k).map((v) => (v == null ? null : v * scale)))];
	drawChart(def, order.map(([, l]) => l), data, { query: expr, start: win.start, end: win.end, from: win.from, step: win.step });
	dash.charts[def.id].keys = order.map(([k]) => k);
	showNow(def, order, cols, win, scale);
}

// With several GPUs, one more chart compares their utilization.
const FLEET_CHART = {
	id: 'all-gpus', title: 'Utilization, every GPU', unit: 'pct', min: 0, max: 100, series: [],
	expr: () => 'gpulse_gpu_utilization_ratio * 100',
	keyOf: (m) => m.gpu,
	order: (cols) => [...cols.keys()].sort((a, b) => a - b).map((g) => [g, `GPU ${g}`]),
};

async function loadCharts(win) {
	const note = $('charts-note');
	if (dash.storage !== true) {
		for (const c of Object.values(dash.charts)) c.plot.destroy();
		dash.charts = {};
		$('charts').replaceChildren();
		note.textContent = `No history to draw: ${dash.storage}`;
		note.hidden = false;
		return;
	}
	note.hidden = true;
	const defs = dash.gpus.length > 1 ? [FLEET_CHART, ...CHARTS] : CHARTS;
	if (dash.gpus.length <= 1) document.querySelector('.chart[data-chart="all-gpus"]')?.remove();
	$('charts-sub').textContent = dash.end == null
		? `GPU ${dash.gpu} · last ${fmtDuration(dash.range)} · step ${win.step} s`
		: `GPU ${dash.gpu} · ${fmtDuration(dash.range)} to ${fmtTime(win.end, true)} · step ${win.step} s`;
	defs.forEach(chartBox); // in this order, whichever answer comes first
	if (defs[0] === FLEET_CHART) $('charts').prepend(chartBox(FLEET_CHART));
	await Promise.all(defs.map((d) => loadChart(d, win)));
}

// ---- diagnosis timeline -----------------------------------------------------------

function evidenceText(e) {
	const v = e.unit === 'ratio' ? `${+(e.value * 100).toFixed(1)}%` : scaled(e.value, { bytes_per_second: 'Bps', hertz: 'Hz', watts: 'W' }[e.unit] || '');
	if (e.op == null) return `${e.name} (${e.stat}) = ${v}`;
	const th = e.unit === 'ratio' ? `${+(e.threshold * 100).toFixed(1)}%` : scaled(e.threshold, { bytes_per_second: 'Bps', hertz: 'Hz', watts: 'W' }[e.unit] || '');
	return `${e.name} (${e.stat}) ${v} ${e.op} ${th}: ${e.holds ? 'holds' : 'does not hold'}`;
}

function windowDetail(w) {
	const box = el('div');
	box.append(el('b', { text: `${w.bottleneck.replace('_', ' ')} · ${fmtTime(w.start_s, true)} – ${fmtTime(w.end_s)}` }));
	if (w.rule) box.append(el('div', { text: w.rule }));
	if (w.summary) box.append(el('div', { text: w.summary }));
	if (w.findings && w.findings.length) box.append(el('div', { text: `findings: ${w.findings.join(', ')}` }));
	const ul = el('ul');
	for (const e of (w.evidence || []).filter((x) => x.op != null).slice(0, 8))
		ul.append(el('li', { class: e.holds ? 'held' : '', text: evidenceText(e) }));
	box.append(ul);
	if (w.advice) box.append(el('div', { text: `advice: ${w.advice}` }));
	return box;
}

function placeTip(ev) {
	const tip = $('tip');
	const x = Math.min(ev.clientX + 12, innerWidth - tip.offsetWidth - 8);
	const y = ev.clientY + 16 + tip.offsetHeight > innerHeight ? ev.clientY - tip.offsetHeight - 12 : ev.clientY + 16;
	tip.style.left = `${Math.max(4, x)}px`;
	tip.style.top = `${Math.max(4, y)}px`;
}

async function loadDiagnosis(win) {
	// The API's history ends now: a pinned window asks from where its data
	// begins on and draws the part up to its end (windows of at most 1/120
	// of that, so a short history gets short windows at any range).
	const nowS = Date.now() / 1000;
	const sinceS = Math.max(5, Math.ceil(nowS - win.from));
	const windowS = Math.max(5, Math.ceil(sinceS / 120 / 5) * 5);
	const line = $('timeline');
	let d;
	try {
		d = await api(`/api/v1/diagnosis?gpu=${dash.gpu}&since=${sinceS}s&window=${windowS}s`);
	} catch (e) {
		if (e instanceof AuthNeeded) throw e;
		line.replaceChildren();
		$('diag-detail').textContent = String(e.message);
		return;
	}
	// Nothing is drawn outside [first data, now] within the view: a window
	// is cut to what it covers, and the text says what is drawn.
	const lo = Math.max(win.start, win.first ?? win.start);
	const hi = Math.min(win.end, nowS);
	const ws = (d.windows || []).filter((w) => String(w.gpu) === dash.gpu)
		.map((w) => ({ ...w, start_s: Math.max(w.start_s, lo), end_s: Math.min(w.end_s, hi) }))
		.filter((w) => w.end_s > w.start_s);
	const span = win.end - win.start;
	const long = span > 86400;
	const what = ws.length === 0 ? 'no window in this range'
		: `${ws.length} window${ws.length === 1 ? '' : 's'}, ${fmtTime(ws[0].start_s, long)}–${fmtTime(ws[ws.length - 1].end_s, long)}`;
	$('diag-sub').textContent = `GPU ${dash.gpu} · ${what} · from the ${d.source === 'store' ? 'store' : 'recent history in memory'}`;
	const segs = [];
	for (const w of ws) {
		const left = (w.start_s - win.start) / span;
		const right = (w.end_s - win.start) / span;
		const seg = el('div', { class: 'seg', 'data-class': w.bottleneck, 'data-start': w.start_s, tabindex: 0 });
		// At least a pixel, as the charts' lines are, so that a short
		// history still shows at a long range (the last pixel for one
		// ending now).
		seg.style.left = `min(${left * 100}%, 100% - 1px)`;
		seg.style.width = `max(${(right - left) * 100}%, 1px)`;
		seg.style.background = cssVar(`--c-${w.bottleneck}`);
		const show = (ev) => {
			const tip = $('tip');
			tip.replaceChildren(windowDetail(w));
			tip.hidden = false;
			placeTip(ev);
		};
		seg.addEventListener('mouseenter', show);
		seg.addEventListener('mousemove', placeTip);
		seg.addEventListener('mouseleave', () => { $('tip').hidden = true; });
		// Touch and keyboard: the evidence goes below the line instead.
		const pin = () => {
			line.querySelectorAll('.seg.on').forEach((s) => s.classList.remove('on'));
			seg.classList.add('on');
			$('diag-detail').replaceChildren(windowDetail(w));
		};
		seg.addEventListener('click', pin);
		seg.addEventListener('focus', pin);
		segs.push(seg);
	}
	line.replaceChildren(...segs);
	dash.timeline = ws.map((w) => ({ start: w.start_s, end: w.end_s, class: w.bottleneck }));
	const axis = line.nextElementSibling?.classList.contains('axis') ? line.nextElementSibling : null;
	const ax = el('div', { class: 'axis' }, el('span', { text: fmtTime(win.start, span > 86400) }), el('span', { text: fmtTime(win.end, span > 86400) }));
	if (axis) axis.replaceWith(ax); else line.after(ax);
	const last = ws[ws.length - 1];
	if (!$('diag-detail').firstChild || !line.querySelector('.seg.on'))
		$('diag-detail').replaceChildren(last ? windowDetail(last) : el('span', { text: 'no windows yet: the first verdict comes after one window' }));
}

function renderLegend() {
	$('legend').replaceChildren(...CLASSES.map((c) => {
		const i = el('i');
		i.style.background = cssVar(`--c-${c}`);
		return el('span', {}, i, c.replace('_', ' '));
	}));
}

// ---- alerts -------------------------------------------------------------------------

function labelText(labels) {
	return Object.entries(labels).filter(([k]) => !['alertname', '__name__', 'alertstate', 'uuid', 'model'].includes(k))
		.map(([k, v]) => `${k}=${v}`).join(' ');
}

// The evidence gathered for an alert (/api/v1/evidence lists, newest first,
// the alerts each piece is linked from): for a firing or pending alert the
// newest piece for its name and GPU; for a resolved one, a piece triggered
// while it fired.
function evidenceFor(list, name, labels, since, until) {
	if (labels.gpu === undefined) return null;
	return list.find((e) => String(e.gpu) === labels.gpu && (e.alerts || []).includes(name) &&
		(until === undefined || (Date.parse(e.triggered_at) / 1000 >= since - 60 &&
			Date.parse(e.triggered_at) / 1000 <= until + 60))) || null;
}

// What one piece of evidence says, in a few lines under the alert list
// (fetched with the page's credentials; the link itself is the raw JSON).
async function showEvidence(url) {
	const box = $('evidence-detail');
	box.hidden = false;
	box.textContent = 'loading…';
	try {
		const d = await api(url);
		const ws = (d.diagnosis && d.diagnosis.windows) || [];
		const c = d.capture || {};
		box.textContent = [
			`evidence ${d.id}: GPU ${d.gpu} (${d.model || '?'}), ${d.cause} ${d.detail}, triggered ${d.triggered_at}`,
			`diagnosis: ${ws.map((w) => w.bottleneck + ((w.findings || []).length ? ' [' + w.findings.join(', ') + ']' : '')).join(' → ') || 'no window'}`,
			`processes: ${(d.processes || []).map((p) => `${p.pid} ${p.comm}`).join(', ') || 'none'}`,
			`capture: ${c.pid ? `pid ${c.pid}, ${c.seconds || 0} s` + (c.failed ? ` failed: ${c.failed}` : '') : c.skipped || 'none'}`,
		].join('\n');
	} catch (e) {
		if (e instanceof AuthNeeded) throw e;
		box.textContent = String(e.message);
	}
}

async function loadAlerts(win) {
	const [now, hist, evidence] = await Promise.all([
		api('/api/v1/alerts'),
		dash.storage !== true ? [] : queryRange('ALERTS{alertstate="firing"}', win.from, win.end, win.step).catch((e) => {
			if (e instanceof AuthNeeded) throw e;
			return [];
		}),
		api('/api/v1/evidence').then((d) => d.evidence || []).catch((e) => {
			if (e instanceof AuthNeeded) throw e;
			return [];
		}),
	]);
	const rows = [];
	const active = new Set();
	for (const a of now.alerts || []) {
		const key = JSON.stringify(Object.entries(a.labels).filter(([k]) => k !== 'alertstate').sort());
		active.add(key);
		rows.push({ state: a.state, name: a.labels.alertname, labels: labelText(a.labels), since: Date.parse(a.activeAt) / 1000,
			value: a.value, summary: (a.annotations && (a.annotations.summary || a.annotations.description)) || '',
			evidence: evidenceFor(evidence, a.labels.alertname, a.labels) });
	}
	for (const r of hist) {
		const labels = { ...r.metric };
		delete labels.__name__;
		const key = JSON.stringify(Object.entries(labels).filter(([k]) => k !== 'alertstate').sort());
		if (active.has(key) || r.values.length === 0) continue;
		const since = r.values[0][0], until = r.values[r.values.length - 1][0];
		rows.push({ state: 'resolved', name: labels.alertname, labels: labelText(labels), since,
			until, value: '', summary: '', evidence: evidenceFor(evidence, labels.alertname, labels, since, until) });
	}
	const order = { firing: 0, pending: 1, resolved: 2 };
	rows.sort((a, b) => order[a.state] - order[b.state] || b.since - a.since);
	dash.alerts = rows;
	const box = $('alerts');
	if (rows.length === 0) {
		box.replaceChildren(el('p', { class: 'empty-note', text: `No alert is firing or pending, and none fired in the last ${fmtDuration(dash.range)}.` }));
		return;
	}
	const tbody = el('tbody');
	for (const r of rows.slice(0, 100)) {
		tbody.append(el('tr', { 'data-state': r.state },
			el('td', { class: `state-${r.state}`, text: r.state }),
			el('td', { text: r.name }),
			el('td', { text: r.labels }),
			el('td', { text: r.until ? `${fmtTime(r.since, true)} – ${fmtTime(r.until)}` : `since ${fmtTime(r.since, true)}` }),
			el('td', { class: 'num', text: r.value === '' ? '' : (+parseFloat(r.value).toPrecision(4)).toString() }),
			el('td', { text: r.summary }),
			el('td', {}, r.evidence ? evidenceLink(r.evidence) : null)));
	}
	const detail = $('evidence-detail') || el('pre', { id: 'evidence-detail', class: 'evidence-detail', hidden: '' });
	box.replaceChildren(el('div', { class: 'tablewrap' }, el('table', {},
		el('thead', {}, el('tr', {}, ...['state', 'alert', 'labels', 'when', 'value', 'summary', 'evidence'].map((h) => el('th', { text: h, class: h === 'value' ? 'num' : null })))),
		tbody)), detail);
}

function evidenceLink(e) {
	const a = el('a', { href: e.url, class: 'evidence-link', title: `evidence ${e.id} (${e.state})`, text: e.state === 'ready' ? 'evidence' : 'gathering…' });
	a.addEventListener('click', (ev) => {
		ev.preventDefault();
		showEvidence(e.url).catch(() => {});
	});
	return a;
}

// ---- who uses the GPU: the activity split per process and per pod -----------------------

// From /api/v1/gpus (already fetched): each process's and each owner's
// part of the GPU's SM, tensor and DRAM activity, its class beside the
// GPU's, and who holds the GPU with the verdict of allocated-but-idle
// (docs/internals/attribution.md).
function pctText(v) {
	return v == null ? '–' : `${+(v * 100).toFixed(1)}%`;
}

function boundText(r) {
	return r.bound ? `${r.bound}${r.bound_detail ? ` (${r.bound_detail})` : ''}` : '–';
}

function splitTable(id, head, rows) {
	const tbody = el('tbody');
	for (const cells of rows)
		tbody.append(el('tr', {}, ...cells.map(([t, num]) => el('td', { class: num ? 'num' : null, text: t }))));
	return el('div', { class: 'tablewrap' }, el('table', { id },
		el('thead', {}, el('tr', {}, ...head.map(([h, num]) => el('th', { text: h, class: num ? 'num' : null })))),
		tbody));
}

function renderTenants() {
	const box = $('tenants');
	const g = dash.gpus.find((x) => String(x.gpu) === dash.gpu) || {};
	const tenants = g.tenants || [], workloads = g.workloads || [], holders = g.holders || [];
	$('tenants-sub').textContent = g.device_bound ? `GPU ${dash.gpu}: ${g.device_bound}` : '';
	const parts = [];
	if (workloads.length)
		parts.push(el('h3', { text: 'By pod (owner)' }), splitTable('split-owners',
			[['owner', 0], ['processes', 1], ['source', 0], ['busy', 1], ['SM', 1], ['tensor', 1], ['DRAM', 1], ['bound by', 0], ['share of what bounds the GPU', 1]],
			workloads.map((w) => [[w.summary || (w.other ? 'other' : '(no owner known)')], [String(w.processes), 1], [w.source],
				[pctText(w.busy), 1], [pctText(w.sm_active), 1], [pctText(w.tensor_active), 1], [pctText(w.dram_bandwidth), 1],
				[boundText(w)], [pctText(w.bottleneck_share), 1]])));
	if (tenants.length)
		parts.push(el('h3', { text: 'By process' }), splitTable('split-procs',
			[['pid', 1], ['command', 0], ['owner', 0], ['source', 0], ['busy', 1], ['SM', 1], ['tensor', 1], ['DRAM', 1], ['bound by', 0]],
			tenants.map((t) => [[t.pid ? String(t.pid) : 'other', 1], [t.comm || ''], [t.owner || ''], [t.source],
				[pctText(t.busy), 1], [pctText(t.sm_active), 1], [pctText(t.tensor_active), 1], [pctText(t.dram_bandwidth), 1], [boundText(t)]])));
	if (holders.length)
		parts.push(el('h3', { text: 'Who holds the GPU' }), splitTable('split-holders',
			[['pod or job', 0], ['held by', 0], ['processes', 1], ['SM part', 1], ['under the idle line for', 1], ['verdict', 0]],
			holders.map((h) => [[h.job ? `job ${h.job}` : `${h.namespace}/${h.pod}`], [h.allocated ? 'allocation' : 'process'],
				[String(h.processes), 1], [pctText(h.sm_active), 1], [h.idle_for_s ? fmtDuration(h.idle_for_s) : '–', 1],
				[h.idle === true ? 'allocated but idle' : h.idle === false ? 'working' : 'not judged']])));
	if (!parts.length)
		parts.push(el('p', { class: 'empty-note', text: 'No process or allocation on this GPU (the split needs GPM: Hopper or newer).' }));
	box.replaceChildren(...parts);
}

// ---- kernels ---------------------------------------------------------------------------

async function loadKernels() {
	const box = $('kernels');
	let procs, ks;
	try {
		[procs, ks] = await Promise.all([api('/api/v1/processes'), api(`/api/v1/kernels?gpu=${dash.gpu}&limit=100`)]);
	} catch (e) {
		if (e instanceof AuthNeeded) throw e;
		box.replaceChildren(el('p', { class: 'empty-note', text: String(e.message) }));
		return;
	}
	const byPid = new Map();
	for (const k of ks.kernels || []) {
		if (!byPid.has(k.pid)) byPid.set(k.pid, []);
		byPid.get(k.pid).push(k);
	}
	const info = new Map((procs.processes || []).map((p) => [p.pid, p]));
	const parts = [];
	// Every process on the GPU: what NVML sees (memory, SM share) beside
	// what the injection library reports (its mode, the top kernel).
	const gpu = dash.gpus.find((g) => String(g.gpu) === dash.gpu) || {};
	const rows = new Map();
	for (const p of gpu.processes || []) rows.set(p.pid, { pid: p.pid, comm: p.comm, used: p.used_bytes, sm: p.sm_ratio });
	for (const [pid, list] of byPid) {
		const r = rows.get(pid) || { pid, comm: list[0].comm };
		r.top = list[0];
		r.mode = info.get(pid)?.mode;
		rows.set(pid, r);
	}
	dash.processes = [...rows.values()];
	if (rows.size) {
		const tbody = el('tbody');
		const list = [...rows.values()].sort((a, b) => (b.used ?? -1) - (a.used ?? -1) || (b.top?.share ?? 0) - (a.top?.share ?? 0));
		for (const r of list.slice(0, 32))
			tbody.append(el('tr', { 'data-pid': r.pid },
				el('td', { class: 'num', text: String(r.pid) }),
				el('td', { text: r.comm || '' }),
				el('td', { class: 'num', text: r.used == null ? '–' : scaled(r.used, 'bytes') }),
				el('td', { class: 'num', text: r.sm == null ? '–' : `${+(r.sm * 100).toFixed(1)}%` }),
				el('td', { class: 'k', text: r.top ? `${r.top.kernel} (${+(r.top.share * 100).toFixed(1)}%)` : r.mode ? '' : 'not traced' })));
		parts.push(el('h3', { text: `Processes on GPU ${dash.gpu}` }), el('div', { class: 'tablewrap' }, el('table', { id: 'procs' },
			el('thead', {}, el('tr', {}, ...[['pid', 1], ['command', 0], ['GPU memory', 1], ['SM', 1], ['top kernel (share of GPU)', 0]].map(([h, n]) => el('th', { text: h, class: n ? 'num' : null })))),
			tbody)));
	}
	if (byPid.size === 0) {
		const why = procs.profiling && !procs.profiling.serving ? `profiling is off${procs.profiling.why_off ? ': ' + procs.profiling.why_off : ''}`
			: 'no process on this GPU runs libgpulse-inject.so: start one with gpulse run -- CMD';
		box.replaceChildren(...parts, el('p', { class: 'empty-note', text: why }));
		return;
	}
	for (const [pid, list] of [...byPid].slice(0, MAX_KERNEL_PROCESSES)) {
		const p = info.get(pid) || {};
		const mode = p.mode ? ` · ${p.mode}${p.stepped_aside ? ' (stepped aside)' : ''}` : '';
		parts.push(el('h3', { text: `pid ${pid} · ${list[0].comm || p.comm || ''}${mode}` }));
		const tbody = el('tbody');
		for (const k of list.slice(0, KERNELS_PER_PROCESS))
			tbody.append(el('tr', { 'data-pid': pid },
				el('td', { class: 'k', text: k.kernel }),
				el('td', { class: 'num', text: `${+(k.share * 100).toFixed(1)}%` }),
				el('td', { class: 'num', text: String(k.launches) }),
				el('td', { class: 'num', text: `${+(k.mean_seconds * 1e6).toPrecision(3)} µs` }),
				el('td', { class: 'num', text: `${+(k.p99_seconds * 1e6).toPrecision(3)} µs` })));
		parts.push(el('div', { class: 'tablewrap' }, el('table', {},
			el('thead', {}, el('tr', {}, ...['kernel', 'share of GPU', 'launches', 'mean', 'p99'].map((h, i) => el('th', { text: h, class: i ? 'num' : null })))),
			tbody)));
	}
	box.replaceChildren(...parts);
}

// ---- refresh ------------------------------------------------------------------------------

let timer = null;
function stopTimer() {
	if (timer) clearTimeout(timer);
	timer = null;
}

function schedule() {
	stopTimer();
	if (!dash.live) return;
	const every = dash.range <= 3600 ? 5000 : 30000;
	timer = setTimeout(refresh, every);
}

async function refresh() {
	// A pick while a refresh runs: that one finishes, then this one runs
	// (its answers for the old view are dropped by loadChart).
	if (dash.busy) {
		dash.again = true;
		return;
	}
	// A hidden tab does not load gpulsed; it refreshes when shown again.
	if (document.visibilityState === 'hidden' && dash.refreshes > 0) {
		dash.stale = true;
		return;
	}
	dash.busy = true;
	dash.again = false;
	stopTimer();
	const status = $('status');
	try {
		// Where the data begins, asked beside the GPUs once the store is
		// known to answer (the first refresh learns that from loadGpus).
		const early = dash.storage === true ? firstSample() : null;
		await loadGpus();
		if (dash.gpu == null) {
			status.textContent = 'gpulsed reports no GPU yet.';
			return;
		}
		const win = windowFor(await (early ?? firstSample()));
		const results = await Promise.allSettled([loadCharts(win), loadDiagnosis(win), loadAlerts(win), loadKernels()]);
		const auth = results.find((r) => r.status === 'rejected' && r.reason instanceof AuthNeeded);
		if (auth) throw auth.reason;
		const errs = results.filter((r) => r.status === 'rejected').map((r) => String(r.reason.message || r.reason));
		dash.errors = errs;
		status.textContent = errs.length ? errs.join(' · ') : '';
		dash.refreshes++;
		dash.lastWindow = win;
	} catch (e) {
		if (e instanceof AuthNeeded) return;
		status.textContent = String(e.message || e);
		dash.errors = [String(e.message || e)];
	} finally {
		dash.busy = false;
		if (dash.again) refresh();
		else if ($('login').hidden) schedule();
	}
}

const MIN_RANGE = 60;
const MAX_RANGE = 30 * 86400;

// A range that is not one of the picker's: an option of its own.
function rangeOption(r) {
	const sel = $('range');
	let o = [...sel.options].find((x) => +x.value === r);
	if (!o) {
		sel.querySelector('option[data-custom]')?.remove();
		o = el('option', { value: r, 'data-custom': '1', text: fmtDuration(r) });
		sel.append(o);
	}
	sel.value = String(r);
}

// Show [a, b] (Unix seconds): a pinned window, not live.
function zoomTo(a, b) {
	const end = Math.round(Math.max(a, b));
	const range = Math.min(MAX_RANGE, Math.max(MIN_RANGE, Math.round(Math.abs(b - a))));
	dash.end = end;
	dash.range = range;
	dash.live = false;
	dash.gen++;
	$('live').checked = false;
	rangeOption(range);
	saveView();
	refresh();
}

function pickGpu(g) {
	if (g === dash.gpu) return;
	notice('');
	dash.gpu = g;
	dash.gen++;
	$('gpu').value = g;
	document.querySelectorAll('.tile').forEach((t) => t.classList.toggle('sel', t.dataset.gpu === g));
	saveView();
	refresh();
}

// The view (GPU, range, live) lives in the URL's query, so a link shows the
// same view and reload keeps it.
function saveView() {
	const p = new URLSearchParams(location.search);
	if (dash.gpu != null) p.set('gpu', dash.gpu);
	p.set('range', dash.range);
	p.set('live', dash.live ? '1' : '0');
	if (dash.end != null) p.set('end', dash.end); else p.delete('end');
	history.replaceState(null, '', `${location.pathname}?${p}`);
}

function loadView() {
	const p = new URLSearchParams(location.search);
	if (p.has('gpu')) dash.gpu = p.get('gpu');
	const r = parseInt(p.get('range'), 10);
	if (r >= MIN_RANGE && r <= MAX_RANGE) dash.range = r;
	if (p.has('live')) dash.live = p.get('live') !== '0';
	// A window pinned at an end time (a link to an incident) is not live.
	const end = parseFloat(p.get('end'));
	if (isFinite(end) && end > 0) {
		dash.end = end;
		dash.live = false;
	}
	rangeOption(dash.range);
	$('live').checked = dash.live;
}

function start() {
	refresh();
}

function applyScheme() {
	const dark = matchMedia('(prefers-color-scheme: dark)').matches;
	document.documentElement.dataset.scheme = dark ? 'dark' : 'light';
	renderLegend();
}

function init() {
	tokenFromFragment();
	loadView();
	applyScheme();
	matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => { applyScheme(); refresh(); });
	$('gpu').addEventListener('change', (e) => pickGpu(e.target.value));
	$('range').addEventListener('change', (e) => { dash.range = +e.target.value; dash.gen++; saveView(); refresh(); });
	$('live').addEventListener('change', (e) => {
		dash.live = e.target.checked;
		if (dash.live && dash.end != null) {
			dash.end = null;
			dash.gen++;
		}
		saveView();
		if (dash.live) refresh(); else stopTimer();
	});
	document.addEventListener('visibilitychange', () => {
		if (document.visibilityState === 'visible' && dash.stale && dash.live) {
			dash.stale = false;
			refresh();
		}
	});
	$('login-go').addEventListener('click', signIn);
	$('signout').addEventListener('click', signOut);
	$('signout').hidden = !sessionStorage.getItem(AUTH_KEY);
	for (const id of ['token', 'user', 'password'])
		$(id).addEventListener('keydown', (e) => { if (e.key === 'Enter') signIn(); });
	let resizeTimer = null;
	new ResizeObserver(() => {
		clearTimeout(resizeTimer);
		resizeTimer = setTimeout(() => {
			for (const [id, c] of Object.entries(dash.charts)) {
				const box = document.querySelector(`.chart[data-chart="${id}"] .plot`);
				if (box && c.plot && box.clientWidth) c.plot.setSize({ width: box.clientWidth, height: 190 });
			}
		}, 100);
	}).observe($('charts'));
	start();
}

init();
