/* `gpulse top`: a live terminal view of every GPU gpulsed watches, in the
 * layout nvtop and htop users know: a header per GPU with bars, history
 * graphs, the bottleneck and its advice, firing alerts, and a process list
 * to sort, filter and signal. The data comes over HTTP from a thread
 * (src/cli/top/top_fetch.c) and is parsed into the model
 * (src/cli/top/top_model.c); this file only lays out, draws (ncurses) and
 * reads keys, so a slow gpulsed never freezes the screen. Design:
 * docs/internals/top.md.
 *
 * Why one file: the model and the fetch thread already stand apart
 * (src/cli/top/); what remains is the terminal side, layout, drawing and
 * keys over one ncurses screen state (struct ui). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curses.h>

#include "cli/client.h"
#include "common/clock.h"
#include "cli/cmd_status.h"
#include "cli/commands.h"
#include "common/status.h"
#include "cli/top/top_fetch.h"
#include "cli/top/top_model.h"

#define DELAY_MIN_MS 100
#define DELAY_MAX_MS 3600000
#define FILTER_MAX 63
#define MESSAGE_NS (6 * NS_PER_SEC)
#define BAR_COL_MIN 38         /* a header column: label, bar, value */
#define BOX_MIN 76             /* a GPU box of full width */
#define COMPACT_MIN 80         /* a one-line GPU of the compact header */
#define PANE_MIN 40            /* a graph pane */
#define LINE_MAX_BYTES 4096

enum { CP_OK = 1, CP_WARN, CP_BAD, CP_GRAPH, CP_HEAD, CP_REPLAY, CP_DOWN, CP_DIM, CP_SEL };

enum mode { M_NORMAL, M_FILTER, M_SIGNAL_MENU, M_SIGNAL_CONFIRM };

static const struct {
	int sig;
	const char *name;
} signals[] = {
	{SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},   {SIGHUP, "SIGHUP"},   {SIGKILL, "SIGKILL"},
	{SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"}, {SIGSTOP, "SIGSTOP"}, {SIGCONT, "SIGCONT"},
	{SIGQUIT, "SIGQUIT"},
};
#define SIGNAL_COUNT ((int)(sizeof signals / sizeof signals[0]))

struct ui {
	bool ascii, color;
	int delay_ms;
	const char *url;
	bool local;
	struct top_data *data;
	struct top_fetch_status st;
	struct top_history *hist;
	int sel_gpu;                 /* index into data->gpus of the graphed GPU */
	enum top_metric metric;
	enum top_sort sort;
	bool reverse;
	char filter[FILTER_MAX + 1];
	enum mode mode;
	int sig_choice;
	uint32_t target_pid;         /* the process of the signal dialog */
	char target_comm[64];
	char target_user[32];        /* as the fetch thread named it; "" unknown */
	int view[TOP_PROC_MAX];
	int nview;
	int sel_row, scroll;
	uint32_t sel_pid;
	int sel_pid_gpu;
	bool help;
	char msg[512];
	bool msg_bad;
	int64_t msg_until_ns;
	int proc_rows;               /* rows of the process list, from the last layout */
	bool owners;                 /* the per-owner view instead of the processes */
};

/* ---- drawing helpers ---------------------------------------------------- */

static void style_on(const struct ui *u, int pair, attr_t mono)
{
	if (u->color && pair)
		attron(COLOR_PAIR(pair));
	if (mono)
		attron(mono);
}

static void style_off(const struct ui *u, int pair, attr_t mono)
{
	if (u->color && pair)
		attroff(COLOR_PAIR(pair));
	if (mono)
		attroff(mono);
}

/* Text at (y, x) fitted into exactly `cols` columns. */
static void put(const struct ui *u, int y, int x, int cols, const char *s)
{
	char buf[LINE_MAX_BYTES];
	if (cols <= 0 || y < 0 || y >= LINES || x >= COLS)
		return;
	if (x + cols > COLS)
		cols = COLS - x;
	if (cols > 1000)
		cols = 1000;
	top_fit(buf, sizeof buf, s, cols, false, u->ascii);
	mvaddstr(y, x, buf);
}

static void putf(const struct ui *u, int y, int x, int cols, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void putf(const struct ui *u, int y, int x, int cols, const char *fmt, ...)
{
	char text[LINE_MAX_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	put(u, y, x, cols, text);
}

static int level_pair(double ratio)
{
	return ratio >= 0.9 ? CP_BAD : ratio >= 0.75 ? CP_WARN : CP_OK;
}

static void set_message(struct ui *u, bool bad, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_message(struct ui *u, bool bad, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(u->msg, sizeof u->msg, fmt, ap);
	va_end(ap);
	u->msg_bad = bad;
	u->msg_until_ns = clock_mono_ns() + MESSAGE_NS;
}

/* ---- the header line ---------------------------------------------------------- */

static void fmt_age(char *out, size_t len, int64_t ns)
{
	long long s = ns / NS_PER_SEC;
	if (s >= 3600)
		snprintf(out, len, "%lldh%02lldm", s / 3600, s % 3600 / 60);
	else if (s >= 60)
		snprintf(out, len, "%lldm%02llds", s / 60, s % 60);
	else
		snprintf(out, len, "%llds", s);
}

static void draw_title(const struct ui *u)
{
	const struct top_data *d = u->data;
	char clock[16], right[640] = "";
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(clock, sizeof clock, "%H:%M:%S", &tm);
	style_on(u, CP_HEAD, A_REVERSE);
	/* "http://" is noise in the title; "https://" stays, so TLS shows. */
	const char *shown = strncasecmp(u->url, "http://", 7) == 0 ? u->url + 7 : u->url;
	putf(u, 0, 0, COLS, " gpulse top  %s  %s  %d GPU%s  every %.1fs  %s", shown,
	     u->st.have_data ? d->mode : "-", d->ngpus, d->ngpus == 1 ? "" : "s",
	     u->delay_ms / 1000.0, clock);
	style_off(u, CP_HEAD, A_REVERSE);
	int64_t now_ns = clock_mono_ns();
	int pair = 0;
	attr_t mono = A_BOLD;
	if (u->st.refreshes == 0) {
		snprintf(right, sizeof right, " connecting ");
	} else if (!u->st.connected) {
		char age[32];
		fmt_age(age, sizeof age, now_ns - u->st.since_mono_ns);
		snprintf(right, sizeof right, " disconnected %s, retrying ", age);
		pair = CP_DOWN;
		mono = A_REVERSE | A_BOLD;
	} else if (strcmp(d->mode, "replay") == 0) {
		if (isfinite(d->replay_speed))
			snprintf(right, sizeof right, " REPLAY x%g ", d->replay_speed);
		else
			snprintf(right, sizeof right, " REPLAY ");
		pair = CP_REPLAY;
		mono = A_REVERSE;
	} else if (u->st.last_ok_mono_ns && now_ns - u->st.last_ok_mono_ns >
		   3 * (int64_t)u->delay_ms * NS_PER_MS + 2 * NS_PER_SEC) {
		char age[32];
		fmt_age(age, sizeof age, now_ns - u->st.last_ok_mono_ns);
		snprintf(right, sizeof right, " slow: data %s old ", age);
		pair = CP_WARN;
	}
	if (right[0]) {
		/* On the right when it fits, else over the end of the line. */
		char fitted[LINE_MAX_BYTES];
		int w = (int)strlen(right);
		int cols = w < COLS - 2 ? w : COLS - 2;
		top_fit(fitted, sizeof fitted, right, cols, false, u->ascii);
		style_on(u, pair, mono);
		mvaddstr(0, COLS - cols, fitted);
		style_off(u, pair, mono);
	}
}

/* ---- a GPU's header -------------------------------------------------------------- */

static void metric_value(const struct top_gpu *g, enum top_metric m, char *out, size_t len)
{
	char a[16], b[16];
	bool have = g->have & (1u << m);
	switch (m) {
	case TM_MEM:
		if (!(g->have_raw & TOP_RAW_MEM)) {
			snprintf(out, len, "-");
			break;
		}
		top_fmt_bytes(a, sizeof a, g->mem_used_bytes);
		top_fmt_bytes(b, sizeof b, g->mem_total_bytes);
		snprintf(out, len, "%s/%s", a, (g->have_raw & TOP_RAW_MEM_TOTAL) ? b : "-");
		break;
	case TM_POWER:
		if (!(g->have_raw & TOP_RAW_POWER))
			snprintf(out, len, "-");
		else if (g->have_raw & TOP_RAW_POWER_LIMIT)
			snprintf(out, len, "%.0f/%.0fW", g->power_w, g->power_limit_w);
		else
			snprintf(out, len, "%.0fW", g->power_w);
		break;
	case TM_TEMP:
		if (g->have_raw & TOP_RAW_TEMP)
			snprintf(out, len, "%.0fC", g->temp_c);
		else
			snprintf(out, len, "-");
		break;
	case TM_CLOCK:
		if (g->have_raw & TOP_RAW_SM_CLOCK)
			snprintf(out, len, "%.0fMHz", g->sm_clock_hz / 1e6);
		else
			snprintf(out, len, "-");
		break;
	case TM_PCIE:
		if (g->have_raw & TOP_RAW_PCIE)
			snprintf(out, len, "%.1fGB/s", fmax(g->pcie_tx_bps, g->pcie_rx_bps) / 1e9);
		else
			snprintf(out, len, "-");
		break;
	default:
		if (have)
			snprintf(out, len, "%.0f%%", g->ratio[m] * 100);
		else
			snprintf(out, len, "-");
	}
}

/* "util [||||||      ] 45%" in `w` columns at (y, x). */
static void draw_bar(const struct ui *u, int y, int x, int w, const struct top_gpu *g,
		     enum top_metric m, int label_w, int value_w)
{
	char value[48], bar[LINE_MAX_BYTES];
	bool have = g->have & (1u << m);
	int cells = w - label_w - value_w - 3;
	if (cells < 1)
		return;
	put(u, y, x, label_w, top_metric_name(m));
	mvaddstr(y, x + label_w, "[");
	top_bar(bar, sizeof bar, cells, have ? g->ratio[m] : 0, have, u->ascii);
	bool warn = m == TM_MEM || m == TM_POWER || m == TM_TEMP;
	int pair = !have ? 0 : warn ? level_pair(m == TM_TEMP ? g->ratio[m] * 100 / 95 : g->ratio[m])
			    : CP_GRAPH;
	style_on(u, pair, warn && have && g->ratio[m] >= 0.9 ? A_BOLD : 0);
	mvaddstr(y, x + label_w + 1, bar);
	style_off(u, pair, warn && have && g->ratio[m] >= 0.9 ? A_BOLD : 0);
	mvaddstr(y, x + label_w + 1 + cells, "]");
	metric_value(g, m, value, sizeof value);
	char fitted[256];
	top_fit(fitted, sizeof fitted, value, value_w, true, u->ascii);
	mvaddstr(y, x + label_w + 2 + cells, " ");
	mvaddstr(y, x + label_w + 3 + cells, fitted);
}

static void gpu_title(const struct top_gpu *g, char *out, size_t len)
{
	const char *h = g->health[0] ? g->health : "-";
	char extra[320] = "";
	if (strcmp(h, "up") != 0)
		snprintf(extra, sizeof extra, " %s%s%s%s", h, g->health_reason[0] ? " (" : "",
			 g->health_reason, g->health_reason[0] ? ")" : "");
	snprintf(out, len, "GPU %d %s%s%s%s", g->index, g->model, extra,
		 g->throttle[0] ? "  held: " : "", g->throttle);
}

static void draw_gpu_box(const struct ui *u, int y, int x, int w, int ncols, const struct top_gpu *g,
			 bool selected)
{
	char title[512];
	gpu_title(g, title, sizeof title);
	style_on(u, 0, A_BOLD | (selected ? A_UNDERLINE : 0));
	put(u, y, x, w - 1, title);
	style_off(u, 0, A_BOLD | (selected ? A_UNDERLINE : 0));
	if (strcmp(g->health[0] ? g->health : "up", "up") != 0) {
		style_on(u, CP_BAD, A_BOLD);
		putf(u, y, x + w - 8, 7, "%7s", strcmp(g->health, "lost") == 0 ? "LOST" : "STALE");
		style_off(u, CP_BAD, A_BOLD);
	} else if (g->have_diag) {
		int n = (int)strlen(g->bottleneck) + 2;
		int cols = n < w / 2 ? n : w / 2;
		style_on(u, strcmp(g->bottleneck, "idle") == 0 ? CP_DIM : CP_WARN, A_BOLD);
		putf(u, y, x + w - 1 - cols, cols, "[%s]", g->bottleneck);
		style_off(u, strcmp(g->bottleneck, "idle") == 0 ? CP_DIM : CP_WARN, A_BOLD);
	}
	int colw = (w - 1) / ncols;
	for (int m = 0; m < TM_COUNT; m++) {
		int r = m / ncols, c = m % ncols;
		draw_bar(u, y + 1 + r, x + c * colw, colw - 1, g, (enum top_metric)m, 7, 12);
	}
}

/* One line per GPU: a small util and memory bar, power, temperature,
 * the bottleneck. */
static void draw_gpu_line(const struct ui *u, int y, int x, int w, const struct top_gpu *g,
			  bool selected)
{
	char v[48], name[32];
	snprintf(name, sizeof name, "GPU%d", g->index);
	style_on(u, 0, A_BOLD | (selected ? A_UNDERLINE : 0));
	put(u, y, x, 6, name);
	style_off(u, 0, A_BOLD | (selected ? A_UNDERLINE : 0));
	/* name 6, util bar (label 5, value 4) c + 11, mem bar (label 4,
	 * value 10) c + 16, two gaps, then power, temperature and class. */
	int c = (w - 6 - 11 - 16 - 2 - 26) / 2;
	c = c < 3 ? 3 : c;
	draw_bar(u, y, x + 6, c + 11, g, TM_UTIL, 5, 4);
	draw_bar(u, y, x + 6 + c + 12, c + 16, g, TM_MEM, 4, 10);
	int xx = x + 6 + 2 * c + 29;
	metric_value(g, TM_POWER, v, sizeof v);
	char tail[160], t[16];
	metric_value(g, TM_TEMP, t, sizeof t);
	snprintf(tail, sizeof tail, "%s %s %s", v, t,
		 strcmp(g->health[0] ? g->health : "up", "up") != 0 ? g->health
		 : g->have_diag ? g->bottleneck : "");
	if (x + w - xx > 0)
		put(u, y, xx, x + w - xx, tail);
}

/* ---- the graph ------------------------------------------------------------------------ */

static void draw_graph_pane(const struct ui *u, int y, int x, int w, int h, const struct top_gpu *g)
{
	char key[96];
	if (g->uuid[0])
		snprintf(key, sizeof key, "%s", g->uuid);
	else
		snprintf(key, sizeof key, "#%d", g->index);
	int slot = top_history_find(u->hist, key);
	int plot_w = w - 5;
	int plot_h = h - 1;
	if (plot_w < 2 || plot_h < 1)
		return;
	double span_s = plot_w * (u->delay_ms / 1000.0);
	char title[256];
	double now = top_history_get(u->hist, slot, u->metric, 0);
	char nowtext[32] = "-";
	if (isfinite(now))
		snprintf(nowtext, sizeof nowtext, "%.0f%%", now * 100);
	snprintf(title, sizeof title, "GPU %d %s %s, last %.0fs", g->index, top_metric_name(u->metric),
		 nowtext, span_s);
	style_on(u, 0, A_BOLD);
	put(u, y, x, w - 1, title);
	style_off(u, 0, A_BOLD);
	for (int r = 0; r < plot_h; r++) {
		const char *axis = r == 0 ? "100%" : r == plot_h - 1 ? "  0%" : r == plot_h / 2 && plot_h > 2
			? " 50%" : "    ";
		style_on(u, CP_DIM, 0);
		mvaddstr(y + 1 + r, x, axis);
		mvaddstr(y + 1 + r, x + 4, u->ascii ? "|" : "\u2502");
		style_off(u, CP_DIM, 0);
	}
	style_on(u, CP_GRAPH, 0);
	for (int c = 0; c < plot_w - 1; c++) {
		unsigned age = (unsigned)(plot_w - 2 - c);
		double v = top_history_get(u->hist, slot, u->metric, age);
		for (int r = 0; r < plot_h; r++)
			mvaddstr(y + 1 + r, x + 5 + c, top_graph_cell(v, r, plot_h, u->ascii));
	}
	style_off(u, CP_GRAPH, 0);
}

/* ---- the process list ----------------------------------------------------------------- */

static void rebuild_view(struct ui *u)
{
	u->nview = top_procs_view(u->data, u->filter, u->sort, u->reverse, u->view, TOP_PROC_MAX);
	/* The selection follows its process across refreshes and re-sorts. */
	int found = -1;
	for (int i = 0; i < u->nview && u->sel_pid; i++) {
		const struct top_proc *p = &u->data->procs[u->view[i]];
		if (p->pid == u->sel_pid && p->gpu == u->sel_pid_gpu) {
			found = i;
			break;
		}
	}
	if (found >= 0)
		u->sel_row = found;
	if (u->sel_row >= u->nview)
		u->sel_row = u->nview - 1;
	if (u->sel_row < 0)
		u->sel_row = 0;
	if (u->nview > 0) {
		const struct top_proc *p = &u->data->procs[u->view[u->sel_row]];
		u->sel_pid = p->pid;
		u->sel_pid_gpu = p->gpu;
	}
}

static void draw_procs(struct ui *u, int y, int rows)
{
	const struct top_data *d = u->data;
	bool kernels = false;
	for (int i = 0; i < d->nprocs; i++)
		kernels |= d->procs[i].injected;
	/* The activity columns (the split's parts) where there is room for
	 * them and something to show. */
	bool acts = false;
	for (int i = 0; i < d->nprocs && COLS >= 100; i++)
		acts |= d->procs[i].have_act != 0;
	int rest = COLS - (acts ? 49 : 34);
	int kw = kernels ? rest * 2 / 5 : 0;
	kw = kw > 200 ? 200 : kw;
	int cw = rest - kw - (kernels ? 1 : 0);
	char head[LINE_MAX_BYTES];
	const char *mark = u->ascii ? (u->reverse ? "^" : "v") : (u->reverse ? "\u25b2" : "\u25bc");
	const char *names[TOP_SORT_COUNT];
	char marked[TOP_SORT_COUNT][24];
	for (int s = 0; s < TOP_SORT_COUNT; s++) {
		snprintf(marked[s], sizeof marked[s], "%s%s", top_sort_name((enum top_sort)s),
			 s == (int)u->sort ? mark : "");
		names[s] = marked[s];
	}
	/* Column by column: the sort mark is one column but several bytes. */
	static const struct {
		enum top_sort s;
		int w;
		bool right;
	} cols[] = {
		{TOP_SORT_PID, 7, true},  {TOP_SORT_USER, 8, false}, {TOP_SORT_GPU, 3, true},
		{TOP_SORT_MEM, 6, true},  {TOP_SORT_SM, 4, true},    {TOP_SORT_COMMAND, 0, false},
	};
	size_t o = 0;
	head[0] = '\0';
	for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
		char cell[256];
		top_fit(cell, sizeof cell, names[cols[c].s], cols[c].w ? cols[c].w : cw, cols[c].right,
			u->ascii);
		o += (size_t)snprintf(head + o, sizeof head - o, "%s%s", c ? " " : "", cell);
	}
	if (kernels)
		snprintf(head + o, sizeof head - o, " TOP KERNEL%s", u->sort == TOP_SORT_KERNEL ? mark : "");
	/* The process's parts of the GPU's SM, tensor and DRAM activity go
	 * after its SM share: head is rebuilt with them in place. */
	if (acts) {
		char tmp[LINE_MAX_BYTES];
		size_t at = 0;
		for (size_t c = 0; c < 5; c++) {
			char cell[256];
			top_fit(cell, sizeof cell, names[cols[c].s], cols[c].w, cols[c].right, u->ascii);
			at += strlen(cell) + (c ? 1 : 0);
		}
		snprintf(tmp, sizeof tmp, "%.*s %4s %4s %4s%s", (int)at, head, "SM.A", "TENS", "DRAM",
			 head + at);
		snprintf(head, sizeof head, "%s", tmp);
	}
	style_on(u, CP_HEAD, A_REVERSE);
	put(u, y, 0, COLS, head);
	style_off(u, CP_HEAD, A_REVERSE);
	if (u->sel_row < u->scroll)
		u->scroll = u->sel_row;
	if (u->sel_row >= u->scroll + rows)
		u->scroll = u->sel_row - rows + 1;
	if (u->scroll > u->nview - rows)
		u->scroll = u->nview - rows;
	if (u->scroll < 0)
		u->scroll = 0;
	for (int r = 0; r < rows; r++) {
		int i = u->scroll + r;
		move(y + 1 + r, 0);
		clrtoeol();
		if (i >= u->nview) {
			if (r == 0) {
				char empty[128] = "  ";
				top_procs_empty_text(d, u->filter, empty + 2, sizeof empty - 2);
				style_on(u, CP_DIM, 0);
				put(u, y + 1, 0, COLS, empty);
				style_off(u, CP_DIM, 0);
			}
			continue;
		}
		const struct top_proc *p = &d->procs[u->view[i]];
		char mem[16] = "-", sm[16] = "-", gpu[16] = "-";
		char user[64], cmd[LINE_MAX_BYTES], kern[1100], kshare[16];
		char line[sizeof cmd + sizeof kern + 128];
		if (p->have_mem)
			top_fmt_bytes(mem, sizeof mem, p->used_bytes);
		if (p->have_sm)
			snprintf(sm, sizeof sm, "%.0f%%", p->sm_ratio * 100);
		if (p->gpu >= 0)
			snprintf(gpu, sizeof gpu, "%d", p->gpu);
		top_fit(user, sizeof user, p->user[0] ? p->user : "-", 8, false, u->ascii);
		/* The owner (pod, job, container) leads the command: "[ml/trainer-0/main] python3". */
		char owned[sizeof p->owner + TOP_CMDLINE + 4];
		const char *what = p->cmdline[0] ? p->cmdline : p->comm[0] ? p->comm : "-";
		if (p->owner[0])
			snprintf(owned, sizeof owned, "[%s] %s", p->owner, what);
		else
			snprintf(owned, sizeof owned, "%s", what);
		top_fit(cmd, sizeof cmd, owned, cw, false, u->ascii);
		kern[0] = '\0';
		if (kernels && kw > 6) {
			if (p->have_kernel) {
				snprintf(kshare, sizeof kshare, " %3.0f%%", p->kernel_share * 100);
				char name[1024];
				top_fit(name, sizeof name, p->kernel, kw - 5, false, u->ascii);
				snprintf(kern, sizeof kern, " %s%s", name, kshare);
			} else {
				snprintf(kern, sizeof kern, " %s", p->injected ? "(no kernels yet)" : "");
			}
		}
		char act[TOP_ACT_COUNT][16];
		for (int m = 0; m < TOP_ACT_COUNT; m++) {
			if (p->have_act & 1u << m)
				snprintf(act[m], sizeof act[m], "%.0f%%", p->act[m] * 100);
			else
				snprintf(act[m], sizeof act[m], "-");
		}
		/* A line longer than the buffer is cut, as the screen cuts it
		 * (the result is used so that the cut is not a warning). */
		int len;
		if (acts)
			len = snprintf(line, sizeof line, "%7u %s %3s %6s %4s %4s %4s %4s %s%s", p->pid, user,
				       gpu, mem, sm, act[TOP_ACT_SM], act[TOP_ACT_TENSOR], act[TOP_ACT_DRAM],
				       cmd, kern);
		else
			len = snprintf(line, sizeof line, "%7u %s %3s %6s %4s %s%s", p->pid, user, gpu, mem,
				       sm, cmd, kern);
		(void)len;
		bool sel = i == u->sel_row;
		style_on(u, sel ? CP_SEL : 0, sel ? A_REVERSE : 0);
		put(u, y + 1 + r, 0, COLS, line);
		style_off(u, sel ? CP_SEL : 0, sel ? A_REVERSE : 0);
	}
}

/* The per-owner view ('o'): each pod, container, job or user on each
 * GPU, with its processes' parts of the GPU's activity summed, and what
 * bounds it; and, in the IDLE column, the pods and jobs that gpulsed
 * judges allocated but idle (/api/v1/gpus holders, as `gpulse status`
 * shows them): "IDLE" and how long their part of the GPU's SM activity
 * has stayed under the idle line. A pod that holds the GPU without a
 * process there has a row of its own. */
static void draw_owners(struct ui *u, int y, int rows)
{
	const struct top_data *d = u->data;
	char head[LINE_MAX_BYTES + 64], owner[LINE_MAX_BYTES];
	int ow = COLS - 69;
	if (ow < 12)
		ow = 12;
	top_fit(owner, sizeof owner, "OWNER", ow, false, u->ascii);
	snprintf(head, sizeof head, "%3s %s %-12s %5s %4s %4s %4s %4s %-7s %s", "GPU", owner, "IDLE",
		 "PROCS", "BUSY", "SM.A", "TENS", "DRAM", "SOURCE", "BOUND");
	style_on(u, CP_HEAD, A_REVERSE);
	put(u, y, 0, COLS, head);
	style_off(u, CP_HEAD, A_REVERSE);
	for (int r = 0; r < rows; r++) {
		move(y + 1 + r, 0);
		clrtoeol();
		if (r >= d->nworkloads) {
			if (r == 0) {
				style_on(u, CP_DIM, 0);
				put(u, y + 1, 0, COLS, "  no activity split yet (it needs GPM and a process list)");
				style_off(u, CP_DIM, 0);
			}
			continue;
		}
		const struct top_workload *w = &d->workloads[r];
		char act[TOP_ACT_COUNT][16], busy[16], idle[24], line[LINE_MAX_BYTES * 2];
		for (int m = 0; m < TOP_ACT_COUNT; m++) {
			if (w->have_act & 1u << m)
				snprintf(act[m], sizeof act[m], "%.0f%%", w->act[m] * 100);
			else
				snprintf(act[m], sizeof act[m], "-");
		}
		if (w->have_busy)
			snprintf(busy, sizeof busy, "%3.0f%%", w->busy * 100);
		else
			snprintf(busy, sizeof busy, "-");
		/* The mark is a word, not only a colour: it must show under
		 * --no-color and in a capture of the screen. 12 columns hold
		 * "IDLE 999h59m", 41 days. */
		snprintf(idle, sizeof idle, "-");
		if (w->idle == TOP_IDLE_IDLE) {
			char age[16] = "";
			if (isfinite(w->idle_for_s) && w->idle_for_s < 1e9)
				fmt_age(age, sizeof age, (int64_t)(w->idle_for_s * NS_PER_SEC));
			snprintf(idle, sizeof idle, "IDLE %s", age);
		}
		top_fit(owner, sizeof owner, w->owner[0] ? w->owner : "(no owner known)", ow, false,
			u->ascii);
		snprintf(line, sizeof line, "%3d %s %-12s %5u %4s %4s %4s %4s %-7s %s", w->gpu, owner,
			 idle, w->processes, busy, act[TOP_ACT_SM], act[TOP_ACT_TENSOR],
			 act[TOP_ACT_DRAM], w->source,
			 w->held_only ? (w->allocated ? "allocated, no activity of its own" : "")
				      : w->bound);
		put(u, y + 1 + r, 0, COLS, line);
		if (w->idle == TOP_IDLE_IDLE) {
			/* Column of the IDLE cell: after "GPU " and the owner. */
			style_on(u, CP_WARN, A_BOLD);
			put(u, y + 1 + r, 4 + ow + 1, 12, idle);
			style_off(u, CP_WARN, A_BOLD);
		}
	}
}

/* ---- overlays ------------------------------------------------------------------------- */

static const char *const help_lines[] = {
	"gpulse top: keys",
	"",
	"  q, F10       quit",
	"  h, ?, F1     this help (any key closes it)",
	"  Up/Down      select a process; PgUp/PgDn, Home/End",
	"  s, F6        next sort column; r reverse the order",
	"  M  P  N  U   sort by memory, SM share, PID, user (again: reverse)",
	"  C  G  K      sort by command, GPU, top kernel share (again: reverse)",
	"  /            filter processes (PID, user, command, owner, kernel)",
	"  Esc          clear the filter",
	"  k, F9        send a signal to the selected process (asks first)",
	"  g, Tab       next GPU for the graphs",
	"  m            next metric for the graphs",
	"  o            per-owner view (pod, container, job, user; IDLE: allocated",
	"               but idle, and for how long) / processes",
	"  + / -        refresh slower / faster",
	"  Space        refresh now; Ctrl-L redraw",
	"",
	"  Bars: util, SM active, tensor, DRAM bandwidth, memory, power of",
	"  its limit, temperature (of 100 C), SM clock of its maximum, PCIe",
	"  (busier direction of the link's peak). \"-\": not read.",
	"  SM.A, TENS, DRAM (100+ columns; o: per owner): a process's part",
	"  of the GPU's SM active, tensor and DRAM bandwidth figures, an",
	"  estimate from its kernels' GPU time (or NVML's samples) that sums",
	"  to the GPU's.",
};
#define HELP_LINES ((int)(sizeof help_lines / sizeof help_lines[0]))

static void draw_box(const struct ui *u, int y, int x, int h, int w)
{
	const char *hz = u->ascii ? "-" : "\u2500", *vt = u->ascii ? "|" : "\u2502";
	const char *tl = u->ascii ? "+" : "\u250c", *tr = u->ascii ? "+" : "\u2510";
	const char *bl = u->ascii ? "+" : "\u2514", *br = u->ascii ? "+" : "\u2518";
	for (int r = 0; r < h; r++) {
		move(y + r, x);
		for (int c = 0; c < w; c++) {
			bool top = r == 0, bottom = r == h - 1, left = c == 0, right = c == w - 1;
			const char *s = " ";
			if ((top || bottom) && (left || right))
				s = top ? (left ? tl : tr) : (left ? bl : br);
			else if (top || bottom)
				s = hz;
			else if (left || right)
				s = vt;
			addstr(s);
		}
	}
}

static void draw_help(const struct ui *u)
{
	int w = 72 < COLS ? 72 : COLS;
	int h = HELP_LINES + 2 < LINES ? HELP_LINES + 2 : LINES;
	int y = (LINES - h) / 2, x = (COLS - w) / 2;
	style_on(u, 0, A_BOLD);
	draw_box(u, y, x, h, w);
	style_off(u, 0, A_BOLD);
	for (int i = 0; i < HELP_LINES && i < h - 2; i++)
		put(u, y + 1 + i, x + 2, w - 4, help_lines[i]);
}

static void draw_signal_menu(const struct ui *u)
{
	int w = 50 < COLS ? 50 : COLS;
	int h = SIGNAL_COUNT + 5;
	if (h > LINES)
		h = LINES;
	int y = (LINES - h) / 2, x = (COLS - w) / 2;
	draw_box(u, y, x, h, w);
	style_on(u, 0, A_BOLD);
	putf(u, y + 1, x + 2, w - 4, "Send a signal to PID %u (%s):", u->target_pid, u->target_comm);
	style_off(u, 0, A_BOLD);
	for (int i = 0; i < SIGNAL_COUNT && y + 2 + i < y + h - 2; i++) {
		bool sel = i == u->sig_choice;
		style_on(u, sel ? CP_SEL : 0, sel ? A_REVERSE : 0);
		putf(u, y + 2 + i, x + 4, w - 8, "%2d %s%s", signals[i].sig, signals[i].name,
		     i == 0 ? " (default)" : "");
		style_off(u, sel ? CP_SEL : 0, sel ? A_REVERSE : 0);
	}
	put(u, y + h - 2, x + 2, w - 4, "Up/Down choose, Enter send, Esc cancel");
}

static void draw_footer(const struct ui *u)
{
	char line[LINE_MAX_BYTES];
	int y = LINES - 1;
	move(y, 0);
	clrtoeol();
	if (u->mode == M_FILTER) {
		style_on(u, CP_HEAD, A_REVERSE);
		putf(u, y, 0, COLS, "Filter: %s_   (Enter keep, Esc clear)", u->filter);
		style_off(u, CP_HEAD, A_REVERSE);
		return;
	}
	if (u->mode == M_SIGNAL_CONFIRM) {
		style_on(u, CP_BAD, A_REVERSE | A_BOLD);
		putf(u, y, 0, COLS, "Send %s (%d) to PID %u (%s)? [y/N]", signals[u->sig_choice].name,
		     signals[u->sig_choice].sig, u->target_pid, u->target_comm);
		style_off(u, CP_BAD, A_REVERSE | A_BOLD);
		return;
	}
	if (u->msg[0] && clock_mono_ns() < u->msg_until_ns) {
		style_on(u, u->msg_bad ? CP_BAD : CP_OK, A_BOLD);
		put(u, y, 0, COLS, u->msg);
		style_off(u, u->msg_bad ? CP_BAD : CP_OK, A_BOLD);
		return;
	}
	if (u->st.refreshes && !u->st.connected) {
		/* Why, in full: the title has no room for it. */
		style_on(u, CP_BAD, A_BOLD);
		put(u, y, 0, COLS, u->st.error);
		style_off(u, CP_BAD, A_BOLD);
		return;
	}
	snprintf(line, sizeof line,
		 "h:help q:quit s:sort(%s) r:rev /:filter%s%s%s k:signal g:GPU m:%s +-:delay",
		 top_sort_name(u->sort), u->filter[0] ? "(" : "", u->filter, u->filter[0] ? ")" : "",
		 top_metric_name(u->metric));
	style_on(u, CP_DIM, 0);
	put(u, y, 0, COLS, line);
	style_off(u, CP_DIM, 0);
}

/* ---- the whole screen ------------------------------------------------------------------- */

static void draw(struct ui *u)
{
	const struct top_data *d = u->data;
	erase();
	draw_title(u);
	int W = COLS, H = LINES;
	int ng = d->ngpus;
	/* Alert lines: one at 24 rows, two from 30, four from 36. */
	int alert_room = H >= 36 ? 4 : H >= 30 ? 2 : 1;
	int nalert_lines = d->nalerts == 0 ? 1 : d->nalerts < alert_room ? d->nalerts : alert_room;
	/* Title, footer, process head, the advice line and the alerts. */
	int fixed = 1 + 1 + 1 + 1 + nalert_lines;
	int rest = H - fixed;
	const int need = 5 + 5;                         /* a small graph and 4 processes */
	int y = 1;
	int hdr_rows = 0;
	if (ng > 0) {
		int gpr = W / BOX_MIN;
		gpr = gpr < 1 ? 1 : gpr > ng ? ng : gpr;
		int boxw = W / gpr;
		int ncols = boxw / BAR_COL_MIN;
		ncols = ncols < 1 ? 1 : ncols > 3 ? 3 : ncols;
		int box_h = 1 + (TM_COUNT + ncols - 1) / ncols;
		int full_rows = (ng + gpr - 1) / gpr * box_h;
		if (full_rows <= rest - need) {
			for (int i = 0; i < ng; i++)
				draw_gpu_box(u, y + i / gpr * box_h, i % gpr * boxw, boxw, ncols, &d->gpus[i],
					     i == u->sel_gpu && ng > 1);
			hdr_rows = full_rows;
		} else {
			int cpr = W / COMPACT_MIN;
			cpr = cpr < 1 ? 1 : cpr > ng ? ng : cpr;
			int cw = W / cpr;
			int lines = (ng + cpr - 1) / cpr;
			int room = rest - need > 1 ? rest - need : 1;
			int shown = lines <= room ? ng : (room - 1) * cpr;
			if (shown < 0)
				shown = 0;
			for (int i = 0; i < shown; i++)
				draw_gpu_line(u, y + i / cpr, i % cpr * cw, cw - 1, &d->gpus[i],
					      i == u->sel_gpu && ng > 1);
			hdr_rows = (shown + cpr - 1) / cpr;
			if (shown < ng) {
				style_on(u, CP_DIM, 0);
				putf(u, y + hdr_rows, 0, W, "  +%d more GPUs: a taller terminal shows them",
				     ng - shown);
				style_off(u, CP_DIM, 0);
				hdr_rows++;
			}
		}
	} else if (u->st.have_data) {
		style_on(u, CP_DIM, 0);
		put(u, y, 0, W, "  gpulsed watches no GPUs");
		style_off(u, CP_DIM, 0);
		hdr_rows = 1;
	} else {
		style_on(u, CP_DIM, 0);
		put(u, y, 0, W, u->st.refreshes ? "  no data from gpulsed yet" : "  connecting to gpulsed...");
		style_off(u, CP_DIM, 0);
		hdr_rows = 1;
	}
	y += hdr_rows;

	/* The bottleneck and its advice, of the graphed GPU. */
	const struct top_gpu *sg = ng > 0 ? &d->gpus[u->sel_gpu < ng ? u->sel_gpu : 0] : NULL;
	if (sg && sg->have_diag) {
		char line[LINE_MAX_BYTES];
		snprintf(line, sizeof line, "GPU %d %s%s%s%s: %s", sg->index, sg->bottleneck,
			 sg->findings[0] ? " (" : "", sg->findings, sg->findings[0] ? ")" : "",
			 sg->advice[0] ? sg->advice : "no advice");
		style_on(u, strcmp(sg->bottleneck, "idle") == 0 ? CP_DIM : CP_WARN, 0);
		put(u, y, 0, W, line);
		style_off(u, strcmp(sg->bottleneck, "idle") == 0 ? CP_DIM : CP_WARN, 0);
	} else if (sg) {
		style_on(u, CP_DIM, 0);
		putf(u, y, 0, W, "GPU %d bottleneck: no complete diagnosis window yet", sg->index);
		style_off(u, CP_DIM, 0);
	}
	y++;

	/* Alerts: firing first. */
	if (d->nalerts == 0) {
		style_on(u, CP_OK, 0);
		put(u, y, 0, W, u->st.have_data ? "alerts: none firing or pending" : "alerts: -");
		style_off(u, CP_OK, 0);
	}
	for (int i = 0; i < d->nalerts && i < nalert_lines; i++) {
		const struct top_alert *a = &d->alerts[i];
		char line[LINE_MAX_BYTES], lead[64] = "";
		if (i == 0)
			snprintf(lead, sizeof lead, "ALERTS %d firing %d pending: ", d->nfiring, d->npending);
		else
			snprintf(lead, sizeof lead, "  ");
		snprintf(line, sizeof line, "%s%s %s%s%s%s%s", lead, a->state, a->name,
			 a->gpu[0] ? " gpu " : "", a->gpu, a->summary[0] ? ": " : "", a->summary);
		bool firing = strcmp(a->state, "firing") == 0;
		style_on(u, firing ? CP_BAD : CP_WARN, firing ? A_BOLD : 0);
		put(u, y + i, 0, W, line);
		style_off(u, firing ? CP_BAD : CP_WARN, firing ? A_BOLD : 0);
	}
	y += nalert_lines;

	int remaining = H - 1 - y - 1; /* footer, process head */
	int graph_h = 0;
	if (remaining >= 7 && ng > 0) {
		/* 2/5 of the rest, more when few processes leave rows empty. */
		int few = remaining - (u->nview > 4 ? u->nview : 4) - 1;
		graph_h = remaining * 2 / 5 > few ? remaining * 2 / 5 : few;
		graph_h = graph_h < 4 ? 4 : graph_h > 16 ? 16 : graph_h;
	}
	if (graph_h > 0) {
		int panes = W / PANE_MIN;
		panes = panes < 1 ? 1 : panes > ng ? ng : panes;
		int pw = W / panes;
		for (int p = 0; p < panes; p++)
			draw_graph_pane(u, y, p * pw, pw, graph_h, &d->gpus[(u->sel_gpu + p) % ng]);
		y += graph_h;
	}
	u->proc_rows = H - 1 - y - 1;
	if (u->proc_rows < 0)
		u->proc_rows = 0;
	if (u->owners)
		draw_owners(u, y, u->proc_rows);
	else
		draw_procs(u, y, u->proc_rows);
	draw_footer(u);
	if (u->mode == M_SIGNAL_MENU)
		draw_signal_menu(u);
	if (u->help)
		draw_help(u);
}

/* ---- signals to processes ------------------------------------------------------------------- */

static void open_signal_menu(struct ui *u)
{
	if (u->nview == 0) {
		set_message(u, true, "no process selected");
		return;
	}
	const struct top_proc *p = &u->data->procs[u->view[u->sel_row]];
	if (!u->local) {
		set_message(u, true, "refused: gpulsed at %s is not on this host, so its processes "
			    "cannot be signalled from here", u->url);
		return;
	}
	if (p->pid <= 1) {
		set_message(u, true, "refused: PID %u cannot be signalled", p->pid);
		return;
	}
	u->target_pid = p->pid;
	snprintf(u->target_comm, sizeof u->target_comm, "%s", p->comm[0] ? p->comm : "?");
	snprintf(u->target_user, sizeof u->target_user, "%s", p->user);
	u->sig_choice = 0;
	u->mode = M_SIGNAL_MENU;
}

/* The comm of a local pid now, to refuse a pid that another program has
 * taken since the list was fetched. */
static bool comm_now(uint32_t pid, char *out, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%u/comm", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fgets(out, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		out[strcspn(out, "\n")] = '\0';
	return ok;
}

static void send_signal(struct ui *u)
{
	int sig = signals[u->sig_choice].sig;
	const char *name = signals[u->sig_choice].name;
	uint32_t pid = u->target_pid;
	char now[64];
	if (!comm_now(pid, now, sizeof now)) {
		set_message(u, true, "PID %u has exited: no %s sent", pid, name);
		return;
	}
	if (strcmp(u->target_comm, "?") != 0 && strcmp(u->target_comm, "unknown") != 0 &&
	    strncmp(now, u->target_comm, 15) != 0) {
		set_message(u, true, "refused: PID %u is now \"%s\", not \"%s\": no %s sent", pid, now,
			    u->target_comm, name);
		return;
	}
	if (kill((pid_t)pid, sig) == 0) {
		set_message(u, false, "sent %s to PID %u (%s)", name, pid, u->target_comm);
		return;
	}
	int e = errno;
	if (e == EPERM) {
		/* The owner's name as the list shows it: looking it up here
		 * could wait on NSS in the UI thread. */
		set_message(u, true, "not permitted: PID %u belongs to %s (you are uid %u); no %s sent",
			    pid, u->target_user[0] ? u->target_user : "another user",
			    (unsigned)geteuid(), name);
	} else {
		set_message(u, true, "cannot send %s to PID %u: %s", name, pid, strerror(e));
	}
}

/* ---- keys ---------------------------------------------------------------------------------------- */

static void set_sort(struct ui *u, enum top_sort s)
{
	if (u->sort == s)
		u->reverse = !u->reverse;
	else
		u->reverse = false;
	u->sort = s;
}

/* Handle one key; false to quit. */
static bool on_key(struct ui *u, struct top_fetch *f, int ch)
{
	if (u->help) {
		u->help = false; /* any key closes the help, q included */
		return true;
	}
	if (u->mode == M_FILTER) {
		size_t n = strlen(u->filter);
		if (ch == 27) {
			u->filter[0] = '\0';
			u->mode = M_NORMAL;
		} else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
			u->mode = M_NORMAL;
		} else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
			if (n > 0)
				u->filter[n - 1] = '\0';
		} else if (ch >= 0x20 && ch < 0x7f && n < FILTER_MAX) {
			u->filter[n] = (char)ch;
			u->filter[n + 1] = '\0';
		}
		u->sel_pid = 0;
		u->sel_row = 0;
		rebuild_view(u);
		return true;
	}
	if (u->mode == M_SIGNAL_MENU) {
		if (ch == 27 || ch == 'q') {
			u->mode = M_NORMAL;
		} else if (ch == KEY_UP && u->sig_choice > 0) {
			u->sig_choice--;
		} else if (ch == KEY_DOWN && u->sig_choice < SIGNAL_COUNT - 1) {
			u->sig_choice++;
		} else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
			u->mode = M_SIGNAL_CONFIRM;
		} else if (ch >= '1' && ch <= '9') {
			/* A signal by its number, where it is in the list. */
			for (int i = 0; i < SIGNAL_COUNT; i++)
				if (signals[i].sig == ch - '0')
					u->sig_choice = i;
		}
		return true;
	}
	if (u->mode == M_SIGNAL_CONFIRM) {
		u->mode = M_NORMAL;
		if (ch == 'y' || ch == 'Y')
			send_signal(u);
		else
			set_message(u, false, "cancelled: no signal sent");
		return true;
	}
	int ng = u->data->ngpus;
	switch (ch) {
	case 'q':
	case KEY_F(10):
		return false;
	case 'h':
	case '?':
	case KEY_F(1):
		u->help = true;
		break;
	case KEY_UP:
		if (u->sel_row > 0)
			u->sel_row--;
		goto moved;
	case KEY_DOWN:
		if (u->sel_row < u->nview - 1)
			u->sel_row++;
		goto moved;
	case KEY_PPAGE:
		u->sel_row -= u->proc_rows > 1 ? u->proc_rows - 1 : 1;
		goto moved;
	case KEY_NPAGE:
		u->sel_row += u->proc_rows > 1 ? u->proc_rows - 1 : 1;
		goto moved;
	case KEY_HOME:
		u->sel_row = 0;
		goto moved;
	case KEY_END:
		u->sel_row = u->nview - 1;
	moved:
		if (u->sel_row >= u->nview)
			u->sel_row = u->nview - 1;
		if (u->sel_row < 0)
			u->sel_row = 0;
		if (u->nview > 0) {
			u->sel_pid = u->data->procs[u->view[u->sel_row]].pid;
			u->sel_pid_gpu = u->data->procs[u->view[u->sel_row]].gpu;
		}
		return true;
	case 's':
	case KEY_F(6):
		u->sort = (enum top_sort)((u->sort + 1) % TOP_SORT_COUNT);
		u->reverse = false;
		break;
	case 'r':
	case 'I':
		u->reverse = !u->reverse;
		break;
	case 'M': set_sort(u, TOP_SORT_MEM); break;
	case 'P': set_sort(u, TOP_SORT_SM); break;
	case 'N': set_sort(u, TOP_SORT_PID); break;
	case 'U': set_sort(u, TOP_SORT_USER); break;
	case 'C': set_sort(u, TOP_SORT_COMMAND); break;
	case 'G': set_sort(u, TOP_SORT_GPU); break;
	case 'K': set_sort(u, TOP_SORT_KERNEL); break;
	case '/':
		u->mode = M_FILTER;
		break;
	case 27:
		u->filter[0] = '\0';
		break;
	case 'k':
	case KEY_F(9):
		open_signal_menu(u);
		break;
	case 'g':
	case '\t':
		if (ng > 0)
			u->sel_gpu = (u->sel_gpu + 1) % ng;
		break;
	case KEY_BTAB:
		if (ng > 0)
			u->sel_gpu = (u->sel_gpu + ng - 1) % ng;
		break;
	case 'm':
		u->metric = (enum top_metric)((u->metric + 1) % TM_COUNT);
		break;
	case 'o':
		u->owners = !u->owners;
		break;
	case '+':
	case '-': {
		int d = u->delay_ms;
		d = ch == '+' ? (d < 1000 ? d + 100 : d + 1000) : (d <= 1000 ? d - 100 : d - 1000);
		d = d < DELAY_MIN_MS ? DELAY_MIN_MS : d > 60000 ? 60000 : d;
		u->delay_ms = d;
		top_fetch_set_period(f, (int64_t)d * NS_PER_MS);
		set_message(u, false, "refresh every %.1f s", d / 1000.0);
		break;
	}
	case ' ':
		top_fetch_poke(f);
		break;
	case 12: /* Ctrl-L */
		clearok(curscr, TRUE);
		break;
	default:
		break;
	}
	rebuild_view(u);
	return true;
}

/* ---- the command ----------------------------------------------------------------------------------- */

static void top_usage(FILE *f)
{
	fprintf(f,
		"usage: gpulse top [--url URL] [--token-file FILE] [--delay SECONDS] [--no-color]\n"
		"                  [--ascii] [--gpu N] [--sort KEY] [--filter TEXT]\n"
		"\n"
		"A live view of every GPU gpulsed watches: a header per GPU with bars (util,\n"
		"SM active, tensor, DRAM bandwidth, memory, power against its limit,\n"
		"temperature, SM clock against its maximum, PCIe), history graphs, the\n"
		"current bottleneck and its advice, firing and pending alerts, and the\n"
		"processes on the GPUs (PID, user, command, GPU memory, SM share, top kernel\n"
		"and its share where libgpulse-inject.so runs) to sort, filter and signal.\n"
		"\n"
		"  --url URL          gpulsed to watch (env GPULSE_URL; default %s)\n"
		"  --token-file FILE  bearer token file (env GPULSE_TOKEN_FILE)\n"
		"  --delay SECONDS    refresh period, 0.1 to 3600 (default 1)\n"
		"  --no-color         monochrome (also when NO_COLOR is set or the terminal has none)\n"
		"  --ascii            ASCII only (also when the locale is not UTF-8)\n"
		"  --gpu N            graph GPU N first (exit 1 when gpulsed has no GPU N)\n"
		"  --sort KEY         mem (default), sm, pid, user, gpu, command, kernel\n"
		"  --filter TEXT      show only processes whose PID, user, command or kernel\n"
		"                     contains TEXT\n"
		"\n"
		"Keys:\n",
		CLIENT_DEFAULT_URL);
	for (int i = 2; i < HELP_LINES; i++)
		fprintf(f, "%s\n", help_lines[i]);
	fprintf(f,
		"\n"
		"Signals go to processes on this host only (a gpulsed at a loopback URL),\n"
		"after a confirmation; a process of another user is refused with the reason.\n"
		"When gpulsed stops answering, the screen says \"disconnected\", keeps the\n"
		"last values and the history, and reconnects by itself. The graphs start\n"
		"with gpulsed's stored history when it keeps one (storage.path).\n");
}

static int parse_sort(const char *s, enum top_sort *out)
{
	static const char *const keys[TOP_SORT_COUNT] = {
		[TOP_SORT_MEM] = "mem", [TOP_SORT_SM] = "sm", [TOP_SORT_PID] = "pid",
		[TOP_SORT_USER] = "user", [TOP_SORT_GPU] = "gpu", [TOP_SORT_COMMAND] = "command",
		[TOP_SORT_KERNEL] = "kernel",
	};
	for (int i = 0; i < TOP_SORT_COUNT; i++)
		if (strcasecmp(s, keys[i]) == 0) {
			*out = (enum top_sort)i;
			return 0;
		}
	return -1;
}

static void init_colors(struct ui *u)
{
	if (!u->color)
		return;
	start_color();
	use_default_colors();
	init_pair(CP_OK, COLOR_GREEN, -1);
	init_pair(CP_WARN, COLOR_YELLOW, -1);
	init_pair(CP_BAD, COLOR_RED, -1);
	init_pair(CP_GRAPH, COLOR_CYAN, -1);
	init_pair(CP_HEAD, COLOR_BLACK, COLOR_CYAN);
	init_pair(CP_REPLAY, COLOR_BLACK, COLOR_YELLOW);
	init_pair(CP_DOWN, COLOR_WHITE, COLOR_RED);
	init_pair(CP_DIM, COLOR_BLUE, -1);
	init_pair(CP_SEL, COLOR_BLACK, COLOR_GREEN);
}

static void on_new_data(struct ui *u)
{
	if (u->st.connected)
		top_history_push(u->hist, u->data);
	else
		top_history_push_gap(u->hist);
	if (u->sel_gpu >= u->data->ngpus)
		u->sel_gpu = 0;
	rebuild_view(u);
}

int cmd_top(int argc, char **argv)
{
	enum { OPT_URL = 256, OPT_TOKEN, OPT_DELAY, OPT_NO_COLOR, OPT_ASCII, OPT_GPU, OPT_SORT, OPT_FILTER };
	static const struct option longopts[] = {
		{"url", required_argument, NULL, OPT_URL},
		{"token-file", required_argument, NULL, OPT_TOKEN},
		{"delay", required_argument, NULL, OPT_DELAY},
		{"no-color", no_argument, NULL, OPT_NO_COLOR},
		{"ascii", no_argument, NULL, OPT_ASCII},
		{"gpu", required_argument, NULL, OPT_GPU},
		{"sort", required_argument, NULL, OPT_SORT},
		{"filter", required_argument, NULL, OPT_FILTER},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct client_opts co = {0};
	bool no_color = false, ascii = false;
	double delay_s = 1.0;
	long first_gpu = 0;
	bool gpu_given = false;
	enum top_sort sort = TOP_SORT_MEM;
	const char *filter = "";
	int ch;
	while ((ch = getopt_long(argc, argv, "hd:", longopts, NULL)) != -1) {
		char *end = NULL;
		switch (ch) {
		case OPT_URL: co.url = optarg; break;
		case OPT_TOKEN: co.token_file = optarg; break;
		case 'd':
		case OPT_DELAY:
			errno = 0;
			delay_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(delay_s >= DELAY_MIN_MS / 1000.0) ||
			    delay_s > DELAY_MAX_MS / 1000.0) {
				fprintf(stderr, "gpulse top: --delay \"%s\": want seconds from 0.1 to 3600\n",
					optarg);
				return CLI_USAGE;
			}
			break;
		case OPT_NO_COLOR: no_color = true; break;
		case OPT_ASCII: ascii = true; break;
		case OPT_GPU:
			errno = 0;
			first_gpu = strtol(optarg, &end, 10);
			gpu_given = true;
			if (errno || end == optarg || *end || first_gpu < 0 || first_gpu >= TOP_GPU_MAX) {
				fprintf(stderr, "gpulse top: --gpu \"%s\": want an index from 0 to %d\n",
					optarg, TOP_GPU_MAX - 1);
				return CLI_USAGE;
			}
			break;
		case OPT_SORT:
			if (parse_sort(optarg, &sort) != 0) {
				fprintf(stderr, "gpulse top: --sort \"%s\": want mem, sm, pid, user, gpu, "
					"command or kernel\n", optarg);
				return CLI_USAGE;
			}
			break;
		case OPT_FILTER:
			if (strlen(optarg) > FILTER_MAX) {
				fprintf(stderr, "gpulse top: --filter: at most %d characters\n", FILTER_MAX);
				return CLI_USAGE;
			}
			filter = optarg;
			break;
		case 'h': top_usage(stdout); return CLI_OK;
		default: top_usage(stderr); return CLI_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gpulse top: unexpected argument \"%s\"\n", argv[optind]);
		top_usage(stderr);
		return CLI_USAGE;
	}
	/* A GPU the host lacks is refused as `gpulse diagnose --gpu` refuses
	 * it, before the screen is taken: showing GPU 0 instead would pass
	 * one card's numbers off as another's. */
	char have[256];
	if (gpu_given && !status_has_gpu(&co, (int)first_gpu, have, sizeof have)) {
		fprintf(stderr, "gpulse top: no GPU %ld at %s (%s%s)\n", first_gpu,
			client_base_url(&co), have[0] ? "its GPUs: " : "it watches no GPU", have);
		return CLI_FAIL;
	}
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		fprintf(stderr, "gpulse top: needs a terminal (for one screen of text, use 'gpulse status')\n");
		return CLI_USAGE;
	}
	/* A bad URL is a usage error, said before the screen is taken. */
	if (strncasecmp(client_base_url(&co), "http://", 7) != 0 &&
	    strncasecmp(client_base_url(&co), "https://", 8) != 0) {
		fprintf(stderr, "gpulse top: bad gpulsed URL \"%s\": it must start with http:// or https://\n",
			client_base_url(&co));
		return CLI_USAGE;
	}

	setlocale(LC_ALL, "");
	const char *codeset = nl_langinfo(CODESET);
	const char *nc = getenv("NO_COLOR");
	struct ui *u = calloc(1, sizeof *u);
	struct top_history *hist = calloc(1, sizeof *hist);
	struct top_data *data = calloc(1, sizeof *data);
	int pipefd[2] = {-1, -1};
	struct top_fetch *f = NULL;
	int rc = CLI_OK;
	if (!u || !hist || !data) {
		fprintf(stderr, "gpulse top: out of memory\n");
		rc = CLI_FAIL;
		goto out;
	}
	u->ascii = ascii || !codeset || strcasecmp(codeset, "UTF-8") != 0;
	u->delay_ms = (int)lround(delay_s * 1000);
	u->url = client_base_url(&co);
	u->local = top_url_is_local(u->url);
	u->data = data;
	u->hist = hist;
	u->sort = sort;
	u->sel_gpu = (int)first_gpu;
	snprintf(u->filter, sizeof u->filter, "%s", filter);
	top_history_init(hist);
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "gpulse top: pipe: %s\n", strerror(errno));
		rc = CLI_FAIL;
		goto out;
	}
	if (top_fetch_start(&f, &co, (int64_t)u->delay_ms * NS_PER_MS, pipefd[1], u->local) != 0) {
		fprintf(stderr, "gpulse top: cannot start the fetcher thread\n");
		rc = CLI_FAIL;
		goto out;
	}

	if (!initscr()) {
		fprintf(stderr, "gpulse top: cannot start the terminal (TERM=%s)\n",
			getenv("TERM") ? getenv("TERM") : "");
		rc = CLI_FAIL;
		goto out;
	}
	u->color = !no_color && !(nc && nc[0]) && has_colors();
	init_colors(u);
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);
	bool running = true;
	while (running) {
		if (top_fetch_take(f, &u->data, &u->st)) {
			struct top_backfill *bf = top_fetch_take_backfill(f);
			if (bf) {
				top_history_seed(u->hist, bf);
				free(bf);
			}
			on_new_data(u);
		}
		draw(u);
		refresh();
		/* Sleep until a key, new data, or the next second for the clock. */
		struct pollfd pfd[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
					{.fd = pipefd[0], .events = POLLIN}};
		int64_t now = clock_wall_ns();
		int wait_ms = (int)((NS_PER_SEC - now % NS_PER_SEC) / NS_PER_MS) + 1;
		int pr = poll(pfd, 2, wait_ms);
		if (pr > 0 && (pfd[1].revents & POLLIN)) {
			char drain[64];
			while (read(pipefd[0], drain, sizeof drain) > 0) {
			}
		}
		if (pr > 0 && (pfd[0].revents & (POLLHUP | POLLERR)) && !(pfd[0].revents & POLLIN))
			break; /* the terminal went away */
		int key;
		while ((key = getch()) != ERR) {
			if (key == KEY_RESIZE)
				continue; /* the next draw uses LINES and COLS */
			if (!on_key(u, f, key)) {
				running = false;
				break;
			}
		}
	}
	endwin();
out:
	top_fetch_stop(f);
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (u)
		free(u->data);
	else
		free(data);
	free(hist);
	free(u);
	return rc;
}
