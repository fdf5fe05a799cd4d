/* Alert delivery (src/alert): matchers and inhibit rules with
 * Alertmanager's semantics, the grouping state machine (group_wait,
 * group_interval, repeat_interval, de-duplication, inhibition) on an
 * explicit clock, the batch file format (round trip, damage caught), and
 * the whole notifier against a receiver in this process (libmicrohttpd):
 * Alertmanager v2 and webhook bodies, retries in order after failures, a
 * receiver that is down across a restart of the notifier (the disk queue
 * carries the batches), the queue bound with its drop counter, a refused
 * batch, the ring's drop counter, and the exec hook. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "alert/batchfile.h"
#include "common/buf.h"
#include "common/clock.h"
#include "alert/group.h"
#include "alert/item.h"
#include "alert/matcher.h"
#include "alert/notify.h"
#include "common/status.h"

/* ---- helpers ------------------------------------------------------------ */

#define L(n, v) {.name = (n), .value = (v)}

static struct alert_item *item(const struct label *l, size_t n, uint64_t fp, int64_t starts,
			       int64_t ends, int resolved)
{
	struct label ann[] = {L("summary", "s")};
	struct alert_notice no = {.labels = l, .nlabels = n, .annotations = ann, .nannotations = 1,
				  .starts_at_ms = starts, .ends_at_ms = ends, .resolved = resolved,
				  .fingerprint = fp};
	struct alert_item *it;
	assert_int_equal(alert_item_new(&it, &no, NULL, 0, NULL), 0);
	return it;
}

/* ---- matchers and inhibition ------------------------------------------- */

static void test_matchers(void **state)
{
	(void)state;
	struct label l[] = {L("alertname", "GPULost"), L("gpu", "3"), L("severity", "critical")};
	struct {
		const char *text;
		bool match;
	} ok[] = {
		{"alertname=~\"GPUDown|GPULost|GPUFallenOffBus\"", true},
		{"alertname=~GPUDown", false},
		{"  gpu = 3 ", true},
		{"gpu!=\"3\"", false},
		{"severity!~\"warn.*\"", true},
		{"missing=\"\"", true},
		{"missing!=\"\"", false},
		{"alertname=\"GPU\\u004cost\"", true},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct alert_matcher m;
		char err[256];
		assert_int_equal(alert_matcher_parse(ok[i].text, &m, err, sizeof err), 0);
		bool matched;
		assert_int_equal(alert_matcher_matches(&m, l, 3, &matched), 0);
		assert_int_equal(matched, ok[i].match);
		alert_matcher_free(&m);
	}
	const char *bad[] = {"", "=x", "gpu", "gpu<3", "gpu=~\"(\"", "gpu=\"3\",a=\"b\"",
			     "gpu=\"3\"} or m{a=\"b\"", "gpu=a\"b", "gpu=\"3\"}[5m"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct alert_matcher m;
		char err[256] = "";
		assert_int_equal(alert_matcher_parse(bad[i], &m, err, sizeof err), GPULSE_EPARSE);
		assert_true(err[0] != '\0');
		alert_matcher_free(&m);
	}
}

static void test_inhibit_rule(void **state)
{
	(void)state;
	const char *src[] = {"alertname=~\"GPUDown|GPULost|GPUFallenOffBus\""};
	const char *eq[] = {"gpu"};
	struct alert_inhibit_rule r;
	char err[256];
	assert_int_equal(alert_inhibit_rule_init(&r, src, 1, NULL, 0, eq, 1, err, sizeof err), 0);
	struct label down0[] = {L("alertname", "GPUDown"), L("gpu", "0")};
	struct label lost0[] = {L("alertname", "GPULost"), L("gpu", "0")};
	struct label mem0[] = {L("alertname", "GPUMemoryHigh"), L("gpu", "0")};
	struct label mem1[] = {L("alertname", "GPUMemoryHigh"), L("gpu", "1")};
	assert_true(alert_inhibit_rule_mutes(&r, down0, 2, mem0, 2));
	assert_false(alert_inhibit_rule_mutes(&r, down0, 2, mem1, 2));
	/* Both sides: sources never mute each other, nor themselves. */
	assert_false(alert_inhibit_rule_mutes(&r, down0, 2, lost0, 2));
	assert_false(alert_inhibit_rule_mutes(&r, down0, 2, down0, 2));
	assert_false(alert_inhibit_rule_mutes(&r, mem0, 2, mem1, 2));
	alert_inhibit_rule_free(&r);

	const char *bad_eq[] = {"gpu-id"};
	assert_int_equal(alert_inhibit_rule_init(&r, src, 1, NULL, 0, bad_eq, 1, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "equal[0]"));
	const char *bad_src[] = {"alertname=~\"(\""};
	assert_int_equal(alert_inhibit_rule_init(&r, bad_src, 1, NULL, 0, NULL, 0, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "source_matchers[0]"));
}

/* ---- grouping ------------------------------------------------------------ */

struct sent {
	int count;
	char keys[16][128];
	size_t nalerts[16];
	bool firing[16];
	size_t nresolved[16];
};

static void record(void *ctx, const struct alert_group_notification *gn)
{
	struct sent *s = ctx;
	assert_true(s->count < 16);
	snprintf(s->keys[s->count], sizeof s->keys[0], "%s", gn->group_key);
	s->nalerts[s->count] = gn->nalerts;
	s->firing[s->count] = gn->firing;
	size_t r = 0;
	for (size_t i = 0; i < gn->nalerts; i++)
		r += gn->resolved[i];
	s->nresolved[s->count] = r;
	s->count++;
}

static void test_grouping(void **state)
{
	(void)state;
	const char *by[] = {"alertname"};
	struct alert_groups_config gc = {.group_by = by, .ngroup_by = 1, .group_wait_ms = 1000,
					 .group_interval_ms = 5000, .repeat_interval_ms = 60000};
	struct alert_groups *g;
	assert_int_equal(alert_groups_new(&g, &gc), 0);
	struct sent s = {0};
	int64_t t = 1000000;
	struct label a0[] = {L("alertname", "Hot"), L("gpu", "0")};
	struct label a1[] = {L("alertname", "Hot"), L("gpu", "1")};
	struct alert_item *i0 = item(a0, 2, 10, t, t + 60000, 0);
	assert_int_equal(alert_groups_update(g, i0, t, t), 0);
	/* group_wait: nothing yet, the next check at t+1000. */
	assert_int_equal(alert_groups_flush(g, t + 500, t + 500, record, &s), t + 1000);
	assert_int_equal(s.count, 0);
	struct alert_item *i1 = item(a1, 2, 11, t + 600, t + 60000, 0);
	assert_int_equal(alert_groups_update(g, i1, t + 600, t + 600), 0);
	assert_int_equal(alert_groups_flush(g, t + 1000, t + 1000, record, &s), t + 6000);
	assert_int_equal(s.count, 1);
	assert_string_equal(s.keys[0], "{}:{alertname=\"Hot\"}");
	assert_int_equal(s.nalerts[0], 2);
	assert_true(s.firing[0]);
	/* Same alerts again (the engine resends): de-duplicated. */
	assert_int_equal(alert_groups_update(g, i0, t + 5000, t + 5000), 0);
	alert_groups_flush(g, t + 6000, t + 6000, record, &s);
	assert_int_equal(s.count, 1);
	/* Resolved: notified at the next group_interval, then dropped. */
	struct alert_item *r1 = item(a1, 2, 11, t + 600, t + 10000, 1);
	assert_int_equal(alert_groups_update(g, r1, t + 10000, t + 10000), 0);
	alert_groups_flush(g, t + 10500, t + 10500, record, &s);
	assert_int_equal(s.count, 1);
	alert_groups_flush(g, t + 11000, t + 11000, record, &s);
	assert_int_equal(s.count, 2);
	assert_int_equal(s.nalerts[1], 2);
	assert_int_equal(s.nresolved[1], 1);
	struct alert_groups_stats st;
	alert_groups_get_stats(g, &st);
	assert_int_equal(st.alerts, 1);
	/* The engine resends the firing alert with a later endsAt. */
	struct alert_item *i0b = item(a0, 2, 10, t, t + 100000, 0);
	assert_int_equal(alert_groups_update(g, i0b, t + 50000, t + 50000), 0);
	/* repeat_interval: the unchanged firing alert again after 60 s. */
	alert_groups_flush(g, t + 56000, t + 56000, record, &s);
	assert_int_equal(s.count, 2);
	alert_groups_flush(g, t + 71000, t + 71000, record, &s);
	assert_int_equal(s.count, 3);
	assert_int_equal(s.nalerts[2], 1);
	/* The last alert resolves by its endsAt passing: a resolved
	 * notification, then the group is gone. */
	alert_groups_flush(g, t + 96000, t + 96000, record, &s);
	assert_int_equal(s.count, 3);
	int64_t next = alert_groups_flush(g, t + 101000, t + 101000, record, &s);
	assert_int_equal(s.count, 4);
	assert_false(s.firing[3]);
	assert_int_equal(next, INT64_MAX);
	alert_groups_get_stats(g, &st);
	assert_int_equal(st.groups, 0);
	assert_int_equal(st.alerts, 0);
	/* A resolved notice of a forgotten alert sends nothing. */
	assert_int_equal(alert_groups_update(g, r1, t + 90000, t + 90000), 0);
	alert_groups_flush(g, t + 92000, t + 92000, record, &s);
	assert_int_equal(s.count, 4);
	free(i0);
	free(i0b);
	free(i1);
	free(r1);
	alert_groups_free(g);
}

static void test_grouping_inhibit_and_bound(void **state)
{
	(void)state;
	const char *src[] = {"alertname=~\"GPUDown|GPULost\""};
	const char *eq[] = {"gpu"};
	struct alert_inhibit_rule r;
	char err[128];
	assert_int_equal(alert_inhibit_rule_init(&r, src, 1, NULL, 0, eq, 1, err, sizeof err), 0);
	struct alert_groups_config gc = {.group_by_all = true, .group_wait_ms = 0,
					 .group_interval_ms = 1000, .repeat_interval_ms = 3600000,
					 .inhibit = &r, .ninhibit = 1, .max_alerts = 3};
	struct alert_groups *g;
	assert_int_equal(alert_groups_new(&g, &gc), 0);
	int64_t t = 5000000;
	struct label down[] = {L("alertname", "GPUDown"), L("gpu", "0")};
	struct label hot0[] = {L("alertname", "Hot"), L("gpu", "0")};
	struct label hot1[] = {L("alertname", "Hot"), L("gpu", "1")};
	struct label hot2[] = {L("alertname", "Hot"), L("gpu", "2")};
	struct alert_item *d = item(down, 2, 1, t, t + 60000, 0), *h0 = item(hot0, 2, 2, t, t + 60000, 0),
			  *h1 = item(hot1, 2, 3, t, t + 60000, 0), *h2 = item(hot2, 2, 4, t, t + 60000, 0);
	assert_int_equal(alert_groups_update(g, d, t, t), 0);
	assert_int_equal(alert_groups_update(g, h0, t, t), 0);
	assert_int_equal(alert_groups_update(g, h1, t, t), 0);
	assert_int_equal(alert_groups_update(g, h2, t, t), GPULSE_ELIMIT);
	assert_true(alert_groups_inhibited(g, h0, t));
	assert_false(alert_groups_inhibited(g, h1, t));
	struct sent s = {0};
	alert_groups_flush(g, t, t, record, &s);
	/* GPUDown{gpu=0} and Hot{gpu=1}; Hot{gpu=0} is muted. */
	assert_int_equal(s.count, 2);
	for (int i = 0; i < s.count; i++)
		assert_null(strstr(s.keys[i], "alertname=\"Hot\", gpu=\"0\""));
	struct alert_groups_stats st;
	alert_groups_get_stats(g, &st);
	assert_int_equal(st.inhibited_total, 1);
	assert_int_equal(st.dropped_total, 1);
	/* GPUDown resolves: Hot{gpu=0} is no longer muted and is notified. */
	struct alert_item *dr = item(down, 2, 1, t, t + 2000, 1);
	assert_int_equal(alert_groups_update(g, dr, t + 2000, t + 2000), 0);
	alert_groups_flush(g, t + 2000, t + 2000, record, &s);
	assert_int_equal(s.count, 4);
	free(d);
	free(dr);
	free(h0);
	free(h1);
	free(h2);
	alert_groups_free(g);
	alert_inhibit_rule_free(&r);
}

/* ---- batch files ---------------------------------------------------------- */

static void test_batchfile(void **state)
{
	(void)state;
	char dir[] = "/tmp/gpulse-notify-XXXXXX";
	assert_non_null(mkdtemp(dir));
	const char *body = "[{\"labels\":{\"alertname\":\"X\"}}]\n";
	struct alert_batch_hdr h = {.created_ms = 1764440000123, .nalerts = 1}, back;
	char err[512];
	assert_int_equal(alert_batch_write(dir, 42, &h, body, strlen(body), err, sizeof err), 0);
	char *data;
	size_t off, len;
	assert_int_equal(alert_batch_read(dir, "000000000000002a.batch", &back, &data, &off, &len, err,
					  sizeof err), 0);
	assert_int_equal(back.created_ms, h.created_ms);
	assert_int_equal(back.nalerts, 1);
	assert_int_equal(len, strlen(body));
	assert_memory_equal(data + off, body, len);
	/* One flipped body byte, a cut file, a longer one: all refused. */
	data[off + 3] ^= 1;
	assert_int_equal(alert_batch_decode(data, off + len, &back, &off, &len, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "CRC"));
	data[off + 3] ^= 1;
	assert_int_equal(alert_batch_decode(data, off + len - 1, &back, &off, &len, err, sizeof err),
			 GPULSE_EPARSE);
	assert_int_equal(alert_batch_decode("gpulse-alert-batch 1 created_ms=1 alerts=1 length=0\n", 52,
					    &back, &off, &len, err, sizeof err), GPULSE_EPARSE);
	free(data);
	assert_int_equal(alert_batch_name_seq("000000000000002a.batch"), 42);
	assert_int_equal(alert_batch_name_seq("00000000000002a.batch"), -1);
	assert_int_equal(alert_batch_name_seq(".tmp-000000000000002a"), -1);
	assert_int_equal(alert_batch_remove(dir, 42), 0);
	assert_int_equal(rmdir(dir), 0);
	/* zlib's check value for "123456789". */
	assert_int_equal(alert_crc32("123456789", 9), 0xcbf43926u);
}

/* ---- a receiver in this process ------------------------------------------------ */

struct receiver_state {
	pthread_mutex_t lock;
	struct MHD_Daemon *mhd;
	int port;
	int fail_next;          /* answer 503 to this many requests */
	int status;             /* answer for the rest (200) */
	int requests;
	char *bodies[64];
	char paths[64][64];
	char auth[64][128];
	int nbodies;
};

struct upload {
	struct buf b;
};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *size, void **ptr)
{
	(void)version;
	struct receiver_state *rs = cls;
	struct upload *u = *ptr;
	if (!u) {
		u = calloc(1, sizeof *u);
		buf_init(&u->b, 1 << 20);
		*ptr = u;
		return MHD_YES;
	}
	if (*size) {
		buf_append(&u->b, data, *size);
		*size = 0;
		return MHD_YES;
	}
	int code;
	pthread_mutex_lock(&rs->lock);
	rs->requests++;
	if (rs->fail_next > 0) {
		rs->fail_next--;
		code = 503;
	} else {
		code = rs->status;
		if (code == 200 && strcmp(method, "POST") == 0 && rs->nbodies < 64) {
			rs->bodies[rs->nbodies] = strdup(u->b.data ? u->b.data : "");
			snprintf(rs->paths[rs->nbodies], sizeof rs->paths[0], "%s", url);
			const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
			snprintf(rs->auth[rs->nbodies], sizeof rs->auth[0], "%s", a ? a : "");
			rs->nbodies++;
		}
	}
	pthread_mutex_unlock(&rs->lock);
	struct MHD_Response *resp = MHD_create_response_from_buffer(2, (void *)(uintptr_t)"ok",
								    MHD_RESPMEM_PERSISTENT);
	enum MHD_Result r = MHD_queue_response(c, (unsigned)code, resp);
	MHD_destroy_response(resp);
	return r;
}

static void on_done(void *cls, struct MHD_Connection *c, void **ptr,
		    enum MHD_RequestTerminationCode toe)
{
	(void)cls, (void)c, (void)toe;
	struct upload *u = *ptr;
	if (u) {
		buf_free(&u->b);
		free(u);
	}
}

static void receiver_start(struct receiver_state *rs, int port)
{
	rs->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
				   (uint16_t)port, NULL, NULL, on_request, rs,
				   MHD_OPTION_NOTIFY_COMPLETED, on_done, rs, MHD_OPTION_END);
	assert_non_null(rs->mhd);
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(rs->mhd, MHD_DAEMON_INFO_BIND_PORT);
	rs->port = di->port;
}

static void receiver_stop(struct receiver_state *rs)
{
	if (rs->mhd)
		MHD_stop_daemon(rs->mhd);
	rs->mhd = NULL;
}

static void receiver_init(struct receiver_state *rs)
{
	memset(rs, 0, sizeof *rs);
	pthread_mutex_init(&rs->lock, NULL);
	rs->status = 200;
}

static void receiver_free(struct receiver_state *rs)
{
	receiver_stop(rs);
	for (int i = 0; i < rs->nbodies; i++)
		free(rs->bodies[i]);
	pthread_mutex_destroy(&rs->lock);
}

static int bodies(struct receiver_state *rs)
{
	pthread_mutex_lock(&rs->lock);
	int n = rs->nbodies;
	pthread_mutex_unlock(&rs->lock);
	return n;
}

static bool wait_bodies(struct receiver_state *rs, int n)
{
	for (int i = 0; i < 2000; i++) {
		if (bodies(rs) >= n)
			return true;
		usleep(5000);
	}
	return false;
}

/* Every body received so far, in arrival order, end to end (the
 * dispatcher may put notices that arrive together into one batch). */
static char *all_bodies(struct receiver_state *rs)
{
	struct buf b;
	buf_init(&b, 1 << 22);
	buf_puts(&b, "");
	pthread_mutex_lock(&rs->lock);
	for (int i = 0; i < rs->nbodies; i++)
		buf_puts(&b, rs->bodies[i]);
	pthread_mutex_unlock(&rs->lock);
	return buf_steal(&b);
}

/* Wait until the received bodies hold every needle, in this order. */
static bool wait_in_order(struct receiver_state *rs, const char *const *needles, size_t n)
{
	for (int i = 0; i < 2000; i++) {
		char *all = all_bodies(rs);
		const char *p = all;
		size_t k = 0;
		for (; k < n; k++) {
			const char *q = strstr(p, needles[k]);
			if (!q)
				break;
			p = q + strlen(needles[k]);
		}
		free(all);
		if (k == n)
			return true;
		usleep(5000);
	}
	return false;
}

/* Send one notice with alertname `name`, gpu `gpu`. */
static void fire(struct notify *n, const char *name, const char *gpu, uint64_t fp, int resolved)
{
	struct label l[] = {L("alertname", name), L("gpu", gpu)};
	struct label a[] = {L("summary", "GPU is hot")};
	int64_t now = clock_wall_ns() / NS_PER_MS;
	struct alert_notice no = {.labels = l, .nlabels = 2, .annotations = a, .nannotations = 1,
				  .starts_at_ms = now - 1000, .ends_at_ms = resolved ? now : now + 240000,
				  .resolved = resolved, .generator_url = "http://node:9401/graph",
				  .fingerprint = fp};
	notify_sink(n, &no, 1);
}

static void test_alertmanager_and_webhook(void **state)
{
	(void)state;
	struct receiver_state rs;
	receiver_init(&rs);
	receiver_start(&rs, 0);
	char am[128], hook[128];
	snprintf(am, sizeof am, "http://127.0.0.1:%d/", rs.port);
	snprintf(hook, sizeof hook, "http://127.0.0.1:%d/hook", rs.port);
	struct notify_receiver_config rc[] = {
		{.kind = NOTIFY_ALERTMANAGER, .target = am, .timeout_ms = 2000, .bearer_token = "s3cret"},
		{.kind = NOTIFY_WEBHOOK, .target = hook, .timeout_ms = 2000},
	};
	struct label ext[] = {L("cluster", "c1"), L("gpu", "not-this")};
	const char *by[] = {"alertname"};
	struct notify_config c = {.receivers = rc, .nreceivers = 2, .external_labels = ext,
				  .nexternal_labels = 2, .external_url = "http://node:9401",
				  .group_by = by, .ngroup_by = 1, .group_wait_ms = 0,
				  .group_interval_ms = 100, .repeat_interval_ms = 3600000};
	struct notify *n;
	char err[256];
	assert_int_equal(notify_new(&n, &c, err, sizeof err), 0);
	fire(n, "Hot", "0", 1, 0);
	assert_true(wait_bodies(&rs, 2));
	assert_true(notify_drain(n, 5000));
	int am_i = strcmp(rs.paths[0], "/api/v2/alerts") == 0 ? 0 : 1;
	assert_string_equal(rs.paths[am_i], "/api/v2/alerts");
	assert_string_equal(rs.auth[am_i], "Bearer s3cret");
	assert_string_equal(rs.paths[1 - am_i], "/hook");
	json_error_t je;
	json_t *v2 = json_loads(rs.bodies[am_i], 0, &je);
	assert_non_null(v2);
	assert_true(json_is_array(v2));
	assert_int_equal(json_array_size(v2), 1);
	json_t *a = json_array_get(v2, 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "labels"), "alertname")), "Hot");
	/* External labels are added, never override. */
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "labels"), "cluster")), "c1");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "labels"), "gpu")), "0");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "annotations"), "summary")),
			    "GPU is hot");
	assert_string_equal(json_string_value(json_object_get(a, "generatorURL")), "http://node:9401/graph");
	const char *starts = json_string_value(json_object_get(a, "startsAt"));
	assert_non_null(starts);
	assert_int_equal(strlen(starts), 24); /* 2026-11-29T18:20:58.123Z */
	assert_int_equal(starts[23], 'Z');
	json_decref(v2);

	json_t *wh = json_loads(rs.bodies[1 - am_i], 0, &je);
	assert_non_null(wh);
	assert_string_equal(json_string_value(json_object_get(wh, "version")), "4");
	assert_string_equal(json_string_value(json_object_get(wh, "status")), "firing");
	assert_string_equal(json_string_value(json_object_get(wh, "groupKey")), "{}:{alertname=\"Hot\"}");
	assert_string_equal(json_string_value(json_object_get(wh, "externalURL")), "http://node:9401");
	assert_string_equal(json_string_value(json_object_get(json_object_get(wh, "groupLabels"), "alertname")), "Hot");
	assert_string_equal(json_string_value(json_object_get(json_object_get(wh, "commonLabels"), "gpu")), "0");
	assert_int_equal(json_array_size(json_object_get(wh, "alerts")), 1);
	json_decref(wh);

	/* Resolution: Alertmanager gets endsAt; the webhook "resolved". */
	fire(n, "Hot", "0", 1, 1);
	assert_true(wait_bodies(&rs, 4));
	assert_true(notify_drain(n, 5000));
	bool saw_resolved = false;
	for (int i = 2; i < 4; i++) {
		json_t *d = json_loads(rs.bodies[i], 0, &je);
		assert_non_null(d);
		if (json_is_object(d)) {
			assert_string_equal(json_string_value(json_object_get(d, "status")), "resolved");
			saw_resolved = true;
		} else {
			assert_non_null(json_object_get(json_array_get(d, 0), "endsAt"));
		}
		json_decref(d);
	}
	assert_true(saw_resolved);
	struct notify_stats st;
	notify_get_stats(n, &st);
	assert_int_equal(st.nreceivers, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(st.receivers[i].sent_total, 2);
		assert_int_equal(st.receivers[i].errors_total, 0);
		assert_int_equal(st.receivers[i].latency_count, 2);
	}
	notify_free(n);
	receiver_free(&rs);
}

static int count_batches(const char *dir)
{
	int count = 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || strcmp(de->d_name, "receiver") == 0)
			continue;
		char sub[600];
		snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
		DIR *s = opendir(sub);
		if (!s)
			continue;
		struct dirent *f;
		while ((f = readdir(s)) != NULL)
			count += alert_batch_name_seq(f->d_name) >= 0;
		closedir(s);
	}
	closedir(d);
	return count;
}

static void rm_tree(const char *dir)
{
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_retry_and_disk_queue(void **state)
{
	(void)state;
	char qdir[] = "/tmp/gpulse-queue-XXXXXX";
	assert_non_null(mkdtemp(qdir));
	struct receiver_state rs;
	receiver_init(&rs);
	receiver_start(&rs, 0);
	int port = rs.port;
	char am[128];
	snprintf(am, sizeof am, "http://127.0.0.1:%d", port);
	struct notify_receiver_config rc = {.kind = NOTIFY_ALERTMANAGER, .target = am, .timeout_ms = 2000};
	struct notify_config c = {.receivers = &rc, .nreceivers = 1, .queue_dir = qdir,
				  .backoff_initial_ms = 10, .backoff_max_ms = 50};
	struct notify *n;
	char err[256];
	assert_int_equal(notify_new(&n, &c, err, sizeof err), 0);

	/* Three failures, then success: delivered once, in order. */
	pthread_mutex_lock(&rs.lock);
	rs.fail_next = 3;
	pthread_mutex_unlock(&rs.lock);
	fire(n, "A", "0", 1, 0);
	fire(n, "B", "0", 2, 0);
	const char *ab[] = {"\"alertname\":\"A\"", "\"alertname\":\"B\""};
	assert_true(wait_in_order(&rs, ab, 2));
	assert_true(notify_drain(n, 5000));
	struct notify_stats st;
	notify_get_stats(n, &st);
	assert_int_equal(st.receivers[0].sent_total, 2);
	assert_true(st.receivers[0].errors_total >= 3);
	assert_int_equal(count_batches(qdir), 0);
	int delivered = bodies(&rs);

	/* The receiver goes down: batches go to disk, in order. */
	receiver_stop(&rs);
	fire(n, "C", "0", 3, 0);
	usleep(20000);
	fire(n, "D", "0", 4, 0);
	usleep(20000);
	fire(n, "C", "0", 3, 1);
	for (int i = 0; i < 400 && count_batches(qdir) < 1; i++)
		usleep(5000);
	int queued = count_batches(qdir);
	assert_true(queued >= 1);
	/* gpulsed stops while it is down: whatever was not yet on disk is
	 * written there, and stays. */
	notify_free(n);
	assert_true(count_batches(qdir) >= queued);
	assert_int_equal(bodies(&rs), delivered);

	/* A new notifier over the same directory, the receiver back on
	 * the same port: everything arrives, in order. */
	assert_int_equal(notify_new(&n, &c, err, sizeof err), 0);
	notify_get_stats(n, &st);
	assert_true(st.queue_batches >= 1);
	receiver_start(&rs, port);
	const char *cdc[] = {"\"alertname\":\"C\"", "\"alertname\":\"D\"", "\"alertname\":\"C\""};
	assert_true(wait_in_order(&rs, cdc, 3));
	assert_true(notify_drain(n, 5000));
	assert_int_equal(count_batches(qdir), 0);
	notify_get_stats(n, &st);
	assert_int_equal(st.receivers[0].sent_total, 3);

	/* A refused batch (HTTP 400) is dropped, not retried. */
	pthread_mutex_lock(&rs.lock);
	rs.status = 400;
	int before = rs.requests;
	pthread_mutex_unlock(&rs.lock);
	fire(n, "E", "0", 5, 0);
	assert_true(notify_drain(n, 5000));
	notify_get_stats(n, &st);
	assert_int_equal(st.receivers[0].dropped_total, 1);
	pthread_mutex_lock(&rs.lock);
	assert_int_equal(rs.requests, before + 1);
	pthread_mutex_unlock(&rs.lock);
	notify_free(n);
	receiver_free(&rs);
	rm_tree(qdir);
}

/* ---- stale alerts in the queue (issue 14, item 6) ------------------------------ */

static _Atomic int64_t fake_now_ms;

static int64_t fake_now(void *ctx)
{
	(void)ctx;
	return atomic_load(&fake_now_ms);
}

/* Notices made at wall time `now`, as the engine stamps them: `firing`
 * with endsAt now + 4 m and, unless NULL, `resolved` with endsAt now, in
 * one call (one dispatch, one batch). */
static void fire_at(struct notify *n, const char *firing, const char *resolved, int64_t now)
{
	struct label l[2][2] = {{L("alertname", firing), L("gpu", "0")},
				      {L("alertname", resolved ? resolved : ""), L("gpu", "0")}};
	struct alert_notice no[2] = {
		{.labels = l[0], .nlabels = 2, .starts_at_ms = now - 60000,
		 .ends_at_ms = now + 240000, .fingerprint = 1},
		{.labels = l[1], .nlabels = 2, .starts_at_ms = now - 60000, .ends_at_ms = now,
		 .resolved = 1, .fingerprint = 2},
	};
	notify_sink(n, no, resolved ? 2 : 1);
}

/* Over the bodies from index `from` on: how often `name` was delivered,
 * and the earliest and latest endsAt it had. */
static int delivered(struct receiver_state *rs, int from, const char *name, int64_t *min_ends,
		     int64_t *max_ends)
{
	int count = 0;
	*min_ends = INT64_MAX;
	*max_ends = INT64_MIN;
	pthread_mutex_lock(&rs->lock);
	for (int i = from; i < rs->nbodies; i++) {
		json_error_t je;
		json_t *arr = json_loads(rs->bodies[i], 0, &je);
		assert_true(json_is_array(arr));
		for (size_t k = 0; k < json_array_size(arr); k++) {
			json_t *a = json_array_get(arr, k);
			const char *an = json_string_value(
				json_object_get(json_object_get(a, "labels"), "alertname"));
			if (!an || strcmp(an, name) != 0)
				continue;
			int64_t ends;
			assert_int_equal(clock_parse_rfc3339(
				json_string_value(json_object_get(a, "endsAt")), &ends), 0);
			count++;
			*min_ends = ends < *min_ends ? ends : *min_ends;
			*max_ends = ends > *max_ends ? ends : *max_ends;
		}
		json_decref(arr);
	}
	pthread_mutex_unlock(&rs->lock);
	return count;
}

static void wait_stats(struct notify *n, uint64_t min_errors, uint64_t min_batches)
{
	struct notify_stats st;
	for (int i = 0; i < 1000; i++) {
		notify_get_stats(n, &st);
		if (st.receivers[0].errors_total >= min_errors && st.queue_batches >= min_batches)
			return;
		usleep(5000);
	}
	fail_msg("errors %" PRIu64 " < %" PRIu64 " or batches %" PRIu64 " < %" PRIu64,
		 st.receivers[0].errors_total, min_errors, st.queue_batches, min_batches);
}

static void test_stale_replay(void **state)
{
	(void)state;
	char qdir[] = "/tmp/gpulse-queue-XXXXXX";
	assert_non_null(mkdtemp(qdir));
	struct receiver_state rs;
	receiver_init(&rs);
	receiver_start(&rs, 0);
	int port = rs.port;
	char am[128];
	snprintf(am, sizeof am, "http://127.0.0.1:%d", port);
	struct notify_receiver_config rc = {.kind = NOTIFY_ALERTMANAGER, .target = am, .timeout_ms = 2000};
	struct notify_config c = {.receivers = &rc, .nreceivers = 1, .queue_dir = qdir,
				  .backoff_initial_ms = 10, .backoff_max_ms = 50,
				  .wall = {.now_ms = fake_now}};
	const int64_t t0 = 1795977480000; /* 2026-12-01, any date does */
	atomic_store(&fake_now_ms, t0);
	struct notify *n;
	char err[256];
	assert_int_equal(notify_new(&n, &c, err, sizeof err), 0);

	/* The receiver fails for six minutes; the engine resends the firing
	 * alert after five. Its first batch's endsAt (t0 + 4 m) has passed
	 * when the receiver is back. */
	pthread_mutex_lock(&rs.lock);
	rs.fail_next = 1 << 30;
	pthread_mutex_unlock(&rs.lock);
	fire_at(n, "Hot", "Gone", t0);
	wait_stats(n, 1, 1);
	atomic_store(&fake_now_ms, t0 + 300000);
	fire_at(n, "Hot", NULL, t0 + 300000);
	wait_stats(n, 2, 2); /* the resend's batch is queued behind */
	int64_t back = t0 + 360000;
	atomic_store(&fake_now_ms, back);
	pthread_mutex_lock(&rs.lock);
	rs.fail_next = 0;
	pthread_mutex_unlock(&rs.lock);
	assert_true(notify_drain(n, 5000));
	int64_t lo, hi;
	/* Still firing at the receiver: never an endsAt already past. */
	assert_true(delivered(&rs, 0, "Hot", &lo, &hi) >= 1);
	assert_true(lo > back);
	assert_int_equal(hi, t0 + 300000 + 240000);
	/* The resolution, once, as it was. */
	assert_int_equal(delivered(&rs, 0, "Gone", &lo, &hi), 1);
	assert_int_equal(lo, t0);
	int before = bodies(&rs);

	/* The receiver down across a restart of gpulsed, ten minutes. */
	receiver_stop(&rs);
	int64_t t1 = t0 + 1000000;
	atomic_store(&fake_now_ms, t1);
	struct notify_stats st;
	notify_get_stats(n, &st);
	fire_at(n, "Warm", "Cold", t1);
	wait_stats(n, st.receivers[0].errors_total + 1, 1);
	notify_free(n);
	assert_true(count_batches(qdir) >= 1);
	back = t1 + 600000;
	atomic_store(&fake_now_ms, back);
	assert_int_equal(notify_new(&n, &c, err, sizeof err), 0);
	receiver_start(&rs, port);
	assert_true(notify_drain(n, 5000));
	assert_int_equal(count_batches(qdir), 0);
	/* Nothing newer was heard of Warm: it is re-stamped, still firing,
	 * for as long as it was meant to last; Cold resolves once. */
	assert_int_equal(delivered(&rs, before, "Warm", &lo, &hi), 1);
	assert_int_equal(lo, back + 240000);
	assert_int_equal(delivered(&rs, before, "Cold", &lo, &hi), 1);
	assert_int_equal(lo, t1);
	notify_free(n);
	receiver_free(&rs);
	rm_tree(qdir);
}

static void test_queue_bound(void **state)
{
	(void)state;
	char qdir[] = "/tmp/gpulse-queue-XXXXXX";
	assert_non_null(mkdtemp(qdir));
	/* Nothing listens on port 9 of loopback: every attempt fails. */
	struct notify_receiver_config rc = {.kind = NOTIFY_WEBHOOK, .target = "http://127.0.0.1:9/x",
					    .timeout_ms = 500};
	struct notify_config c = {.receivers = &rc, .nreceivers = 1, .queue_dir = qdir,
				  .queue_max_files = 2, .group_by_all = true, .group_wait_ms = 0,
				  .group_interval_ms = 10, .backoff_initial_ms = 10000,
				  .backoff_max_ms = 10000, .ring_capacity = 4};
	struct notify *n;
	char err[256];
	assert_int_equal(notify_new(&n, &c, err, sizeof err), 0);
	struct notify_stats st;
	for (int i = 0; i < 4; i++) {
		char g[8];
		snprintf(g, sizeof g, "%d", i);
		fire(n, "Hot", g, 100 + (uint64_t)i, 0);
		/* Each group its own batch: the next fired once this one is
		 * queued or dropped, however long that takes here (a fixed
		 * 60 ms, as until 2026-12-08, let a loaded machine put two in
		 * one batch). */
		for (int k = 0; k < 1000; k++) {
			notify_get_stats(n, &st);
			if (st.queue_batches + st.receivers[0].dropped_total >= (uint64_t)i + 1)
				break;
			usleep(5000);
		}
	}
	for (int i = 0; i < 200; i++) {
		notify_get_stats(n, &st);
		if (st.receivers[0].dropped_total >= 2)
			break;
		usleep(10000);
	}
	assert_int_equal(st.queue_batches, 2);
	assert_int_equal(st.receivers[0].dropped_total, 2);
	assert_true(count_batches(qdir) <= 2);
	/* The ring: more notices in one call than it holds are counted. */
	struct label l[] = {L("alertname", "X")};
	struct alert_notice many[6];
	for (int i = 0; i < 6; i++)
		many[i] = (struct alert_notice){.labels = l, .nlabels = 1, .fingerprint = 7};
	notify_sink(n, many, 6);
	notify_get_stats(n, &st);
	assert_true(st.ring_dropped_total >= 2);
	notify_free(n);
	rm_tree(qdir);
}

static void test_exec_hook(void **state)
{
	(void)state;
	char dir[] = "/tmp/gpulse-exec-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char script[256], out[256], envout[256];
	snprintf(script, sizeof script, "%s/hook.sh", dir);
	snprintf(out, sizeof out, "%s/out.json", dir);
	snprintf(envout, sizeof envout, "%s/env.txt", dir);
	FILE *f = fopen(script, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\ncat > \"$1.tmp\" && env > \"$2\" && mv \"$1.tmp\" \"$1\"\n");
	fclose(f);
	assert_int_equal(chmod(script, 0700), 0);
	const char *args[] = {out, envout};
	struct notify_receiver_config rc = {.kind = NOTIFY_EXEC, .target = script, .args = args,
					    .nargs = 2, .timeout_ms = 5000};
	struct notify_config c = {.receivers = &rc, .nreceivers = 1, .group_by_all = true,
				  .group_interval_ms = 100};
	struct notify *n;
	char err[256];
	setenv("GPULSE_SECRET_FOR_TEST", "leak", 1);
	assert_int_equal(notify_new(&n, &c, err, sizeof err), 0);
	fire(n, "Hot", "0", 1, 0);
	assert_true(notify_drain(n, 10000));
	json_error_t je;
	json_t *d = json_load_file(out, 0, &je);
	assert_non_null(d);
	assert_string_equal(json_string_value(json_object_get(d, "version")), "4");
	assert_string_equal(json_string_value(json_object_get(d, "status")), "firing");
	json_decref(d);
	/* A minimal environment: nothing of the daemon's leaks through. */
	char envtext[4096] = "";
	f = fopen(envout, "r");
	assert_non_null(f);
	size_t got = fread(envtext, 1, sizeof envtext - 1, f);
	envtext[got] = '\0';
	fclose(f);
	assert_null(strstr(envtext, "GPULSE_SECRET_FOR_TEST"));
	assert_non_null(strstr(envtext, "PATH="));
	notify_free(n);

	/* A hook that hangs is killed at its timeout and retried. */
	f = fopen(script, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\nexec sleep 30\n");
	fclose(f);
	rc.timeout_ms = 200;
	c.backoff_initial_ms = 10000;
	assert_int_equal(notify_new(&n, &c, err, sizeof err), 0);
	int64_t t0 = clock_mono_ns();
	fire(n, "Hot", "1", 2, 0);
	struct notify_stats st;
	for (int i = 0; i < 500; i++) {
		notify_get_stats(n, &st);
		if (st.receivers[0].errors_total > 0)
			break;
		usleep(10000);
	}
	assert_int_equal(st.receivers[0].errors_total, 1);
	assert_true(clock_mono_ns() - t0 < 5 * NS_PER_SEC);
	notify_free(n);
	rm_tree(dir);
}

/* A wall clock stepped back an hour under the delivery thread (an NTP
 * step): a new alert of a group already notified is still sent at the
 * group's next check, group_interval later on the monotonic clock. When
 * the checks were scheduled on the wall clock, it waited the hour. */
static void test_clock_step_back(void **state)
{
	(void)state;
	struct receiver_state rs;
	receiver_init(&rs);
	receiver_start(&rs, 0);
	char hook[128];
	snprintf(hook, sizeof hook, "http://127.0.0.1:%d/hook", rs.port);
	struct notify_receiver_config rc = {.kind = NOTIFY_WEBHOOK, .target = hook, .timeout_ms = 2000};
	const char *by[] = {"alertname"};
	struct notify_config c = {.receivers = &rc, .nreceivers = 1, .group_by = by, .ngroup_by = 1,
				  .group_wait_ms = 0, .group_interval_ms = 100,
				  .repeat_interval_ms = 3600000, .wall = {.now_ms = fake_now}};
	const int64_t t0 = 1795977480000;
	atomic_store(&fake_now_ms, t0);
	struct notify *n;
	char err[256];
	assert_int_equal(notify_new(&n, &c, err, sizeof err), 0);
	struct label l0[] = {L("alertname", "Hot"), L("gpu", "0")};
	struct alert_notice a0 = {.labels = l0, .nlabels = 2, .starts_at_ms = t0 - 1000,
				  .ends_at_ms = t0 + 240000, .fingerprint = 1};
	notify_sink(n, &a0, 1);
	assert_true(wait_bodies(&rs, 1));

	const int64_t back = t0 - 3600000;
	atomic_store(&fake_now_ms, back);
	struct label l1[] = {L("alertname", "Hot"), L("gpu", "1")};
	struct alert_notice a1 = {.labels = l1, .nlabels = 2, .starts_at_ms = back - 1000,
				  .ends_at_ms = back + 240000, .fingerprint = 2};
	notify_sink(n, &a1, 1);
	assert_true(wait_bodies(&rs, 2));
	pthread_mutex_lock(&rs.lock);
	json_error_t je;
	json_t *d = json_loads(rs.bodies[1], 0, &je);
	pthread_mutex_unlock(&rs.lock);
	assert_non_null(d);
	assert_string_equal(json_string_value(json_object_get(d, "groupKey")), "{}:{alertname=\"Hot\"}");
	json_t *alerts = json_object_get(d, "alerts");
	assert_int_equal(json_array_size(alerts), 2);
	bool saw_new = false;
	for (size_t i = 0; i < json_array_size(alerts); i++) {
		json_t *lb = json_object_get(json_array_get(alerts, i), "labels");
		saw_new |= strcmp(json_string_value(json_object_get(lb, "gpu")), "1") == 0;
	}
	assert_true(saw_new);
	json_decref(d);
	notify_free(n);
	receiver_free(&rs);
}

static void test_config_errors(void **state)
{
	(void)state;
	struct notify *n;
	char err[256];
	struct notify_receiver_config bad_url = {.kind = NOTIFY_WEBHOOK, .target = "ftp://x"};
	struct notify_config c = {.receivers = &bad_url, .nreceivers = 1};
	assert_int_equal(notify_new(&n, &c, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "http://"));
	struct notify_receiver_config rel = {.kind = NOTIFY_EXEC, .target = "hook.sh"};
	c.receivers = &rel;
	assert_int_equal(notify_new(&n, &c, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "absolute"));
	const char *src[] = {"alertname=~\"(\""};
	struct notify_inhibit_config ic = {.source = src, .nsource = 1};
	struct notify_receiver_config ok = {.kind = NOTIFY_WEBHOOK, .target = "http://127.0.0.1:9/"};
	c.receivers = &ok;
	c.inhibit = &ic;
	c.ninhibit = 1;
	assert_int_equal(notify_new(&n, &c, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "inhibit_rules[0]: source_matchers[0]"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matchers),
		cmocka_unit_test(test_inhibit_rule),
		cmocka_unit_test(test_grouping),
		cmocka_unit_test(test_grouping_inhibit_and_bound),
		cmocka_unit_test(test_batchfile),
		cmocka_unit_test(test_alertmanager_and_webhook),
		cmocka_unit_test(test_retry_and_disk_queue),
		cmocka_unit_test(test_stale_replay),
		cmocka_unit_test(test_queue_bound),
		cmocka_unit_test(test_exec_hook),
		cmocka_unit_test(test_clock_step_back),
		cmocka_unit_test(test_config_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
