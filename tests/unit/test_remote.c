/* Remote write (src/remote/): the WriteRequest encoding decoded back with
 * protobuf-c, snappy both ways, relabelling against Prometheus's
 * documented behaviour (model/relabel/relabel_test.go cases), the disk
 * queue (append, read, acknowledge, reopen, a torn tail, the byte bound)
 * and the remote_write configuration's errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "daemon/config.h"
#include "remote/relabel.h"
#include "remote/rw_codec.h"
#include "remote/segq.h"
#include "common/status.h"

static void test_encode_decode(void **state)
{
	(void)state;
	struct label l1[] = {{"__name__", "gpulse_gpu_power_watts"}, {"gpu", "0"}};
	struct label l2[] = {{"__name__", "gpulse_gpu_up"}, {"gpu", "1"}, {"uuid", "GPU-x"}};
	struct rw_sample s1[] = {{1000, 1.5}, {1100, 2.5}, {1200, -3}};
	struct rw_sample s2[] = {{5000, 1}};
	struct rw_series ser[] = {{l1, 2, s1, 3}, {l2, 3, s2, 1}};
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_int_equal(rw_encode(ser, 2, &b), 0);
	Prometheus__WriteRequest *wr = NULL;
	char err[256];
	assert_int_equal(rw_decode(b.data, b.len, &wr, err, sizeof err), 0);
	assert_int_equal(wr->n_timeseries, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(wr->timeseries[i]->n_labels, ser[i].nlabels);
		for (size_t j = 0; j < ser[i].nlabels; j++) {
			assert_string_equal(wr->timeseries[i]->labels[j]->name, ser[i].labels[j].name);
			assert_string_equal(wr->timeseries[i]->labels[j]->value, ser[i].labels[j].value);
		}
		assert_int_equal(wr->timeseries[i]->n_samples, ser[i].nsamples);
		for (size_t j = 0; j < ser[i].nsamples; j++) {
			assert_int_equal(wr->timeseries[i]->samples[j]->timestamp, ser[i].samples[j].t_ms);
			assert_true(wr->timeseries[i]->samples[j]->value == ser[i].samples[j].v);
		}
	}
	prometheus__write_request__free_unpacked(wr, NULL);
	/* Not snappy, and snappy of something that is not a WriteRequest. */
	assert_int_equal(rw_decode("\xff\xff\xff\xff\xff\xff", 6, &wr, err, sizeof err), GPULSE_EPARSE);
	buf_reset(&b);
	assert_int_equal(rw_snappy_compress("\x0a\xff\xff", 3, &b), 0);
	assert_int_equal(rw_decode(b.data, b.len, &wr, err, sizeof err), GPULSE_EPARSE);
	buf_free(&b);
}

static void test_snappy_round_trip(void **state)
{
	(void)state;
	size_t n = 300000;
	char *in = malloc(n);
	for (size_t i = 0; i < n; i++)
		in[i] = (char)((i * 7919) % 251 < 100 ? 'a' : (char)(i % 256));
	struct buf c, u;
	buf_init(&c, 1 << 22);
	buf_init(&u, 1 << 22);
	assert_int_equal(rw_snappy_compress(in, n, &c), 0);
	char err[128];
	assert_int_equal(rw_snappy_uncompress(c.data, c.len, n, &u, err, sizeof err), 0);
	assert_int_equal(u.len, n);
	assert_memory_equal(u.data, in, n);
	/* A bound below the decoded size is refused. */
	buf_reset(&u);
	assert_int_equal(rw_snappy_uncompress(c.data, c.len, n - 1, &u, err, sizeof err), GPULSE_ELIMIT);
	/* A damaged body is refused, not decoded. */
	c.data[c.len / 2] ^= 0x5a;
	c.data[c.len / 2 + 1] ^= 0xff;
	buf_reset(&u);
	int rc = rw_snappy_uncompress(c.data, c.len, n, &u, err, sizeof err);
	assert_true(rc == GPULSE_EPARSE || (rc == 0 && memcmp(u.data, in, n) != 0));
	free(in);
	buf_free(&c);
	buf_free(&u);
}

/* Relabel `in` (NULL-terminated name, value pairs) with one rule. */
static bool relabel1(const struct relabel_spec *sp, const char *const *in, struct relabel_set *out)
{
	struct label l[16];
	size_t n = 0;
	for (; in[2 * n]; n++)
		l[n] = (struct label){in[2 * n], in[2 * n + 1]};
	struct relabel *r = NULL;
	char err[256];
	assert_int_equal(relabel_compile(sp, 1, &r, err, sizeof err), 0);
	bool keep = false;
	assert_int_equal(relabel_apply(r, l, n, out, &keep), 0);
	relabel_free(r);
	return keep;
}

static const char *get(const struct relabel_set *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->name[i], name) == 0)
			return s->value[i];
	return NULL;
}

static void test_relabel_actions(void **state)
{
	(void)state;
	const char *in[] = {"__name__", "m", "a", "foo", "b", "bar", "c", "FoO", NULL};
	struct relabel_set s = {0};
	/* replace with captures in replacement (relabel_test.go). */
	struct relabel_spec r1 = {.source_labels = {"a"}, .nsource = 1, .regex = "f(.*)",
				  .target_label = "d", .replacement = "ch${1}-ch${1}"};
	assert_true(relabel1(&r1, in, &s));
	assert_string_equal(get(&s, "d"), "choo-choo");
	/* No match: unchanged. */
	struct relabel_spec r2 = {.source_labels = {"a"}, .nsource = 1, .regex = "x(.*)",
				  .target_label = "d"};
	assert_true(relabel1(&r2, in, &s));
	assert_null(get(&s, "d"));
	/* Anchored: "oo" does not match "foo". */
	struct relabel_spec r2b = {.source_labels = {"a"}, .nsource = 1, .regex = "oo",
				   .action = "drop"};
	assert_true(relabel1(&r2b, in, &s));
	/* Joined sources with the separator; an empty result deletes. */
	struct relabel_spec r3 = {.source_labels = {"a", "b"}, .nsource = 2, .regex = "foo;bar",
				  .target_label = "b", .replacement = ""};
	assert_true(relabel1(&r3, in, &s));
	assert_null(get(&s, "b"));
	/* keep and drop. */
	struct relabel_spec k = {.source_labels = {"a"}, .nsource = 1, .regex = "fo+",
				 .action = "keep"};
	assert_true(relabel1(&k, in, &s));
	k.regex = "ba.";
	assert_false(relabel1(&k, in, &s));
	struct relabel_spec d = {.source_labels = {"b"}, .nsource = 1, .regex = "ba.",
				 .action = "drop"};
	assert_false(relabel1(&d, in, &s));
	/* labelmap, labeldrop, labelkeep. */
	struct relabel_spec lm = {.regex = "(a|b)", .replacement = "x_$1", .action = "labelmap"};
	assert_true(relabel1(&lm, in, &s));
	assert_string_equal(get(&s, "x_a"), "foo");
	assert_string_equal(get(&s, "x_b"), "bar");
	assert_string_equal(get(&s, "a"), "foo");
	struct relabel_spec ld = {.regex = "a|b", .action = "labeldrop"};
	assert_true(relabel1(&ld, in, &s));
	assert_null(get(&s, "a"));
	assert_null(get(&s, "b"));
	assert_non_null(get(&s, "c"));
	struct relabel_spec lk = {.regex = "__name__|c", .action = "labelkeep"};
	assert_true(relabel1(&lk, in, &s));
	assert_int_equal(s.n, 2);
	/* Dropping __name__ drops the series. */
	struct relabel_spec ln = {.regex = "__name__", .action = "labeldrop"};
	assert_false(relabel1(&ln, in, &s));
	/* lowercase, uppercase. */
	struct relabel_spec lc = {.source_labels = {"c"}, .nsource = 1, .target_label = "lc",
				  .action = "lowercase"};
	assert_true(relabel1(&lc, in, &s));
	assert_string_equal(get(&s, "lc"), "foo");
	lc.action = "uppercase";
	assert_true(relabel1(&lc, in, &s));
	assert_string_equal(get(&s, "lc"), "FOO");
	/* keepequal / dropequal. */
	const char *eq[] = {"__name__", "m", "a", "v", "b", "v", NULL};
	struct relabel_spec ke = {.source_labels = {"a"}, .nsource = 1, .target_label = "b",
				  .action = "keepequal"};
	assert_true(relabel1(&ke, eq, &s));
	assert_false(relabel1(&ke, in, &s));
	ke.action = "dropequal";
	assert_false(relabel1(&ke, eq, &s));
	assert_true(relabel1(&ke, in, &s));
	/* hashmod: within the modulus, the same for the same value. */
	struct relabel_spec hm = {.source_labels = {"a"}, .nsource = 1, .target_label = "h",
				  .action = "hashmod", .modulus = 7};
	assert_true(relabel1(&hm, in, &s));
	char first[32];
	snprintf(first, sizeof first, "%s", get(&s, "h"));
	assert_true(atoi(first) >= 0 && atoi(first) < 7);
	assert_true(relabel1(&hm, in, &s));
	assert_string_equal(get(&s, "h"), first);
	relabel_set_clear(&s);
}

static void test_relabel_invalid(void **state)
{
	(void)state;
	struct relabel *r = NULL;
	char err[256];
	const struct relabel_spec bad[] = {
		{.action = "explode"},
		{.action = "replace"},                                    /* no target_label */
		{.action = "hashmod", .target_label = "h"},               /* no modulus */
		{.action = "lowercase", .target_label = "x", .replacement = "y"},
		{.action = "keepequal", .target_label = "x", .regex = "a"},
		{.action = "labeldrop", .regex = "a", .target_label = "t"},
		{.regex = "a(?=b)", .target_label = "t"},                 /* RE2 refuses lookahead */
		{.source_labels = {"0bad"}, .nsource = 1, .target_label = "t"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		assert_int_equal(relabel_compile(&bad[i], 1, &r, err, sizeof err), GPULSE_EINVAL);
		assert_null(r);
		assert_non_null(strstr(err, "relabel rule 0"));
	}
}

static char qdir[256];

static int setup_dir(void **state)
{
	(void)state;
	snprintf(qdir, sizeof qdir, "/tmp/gpulse-segq.XXXXXX");
	assert_non_null(mkdtemp(qdir));
	return 0;
}

static int teardown_dir(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", qdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_queue_ack_reopen(void **state)
{
	(void)state;
	struct segq *q = NULL;
	char err[256];
	assert_int_equal(segq_open(&q, qdir, 4u << 20, err, sizeof err), 0);
	for (int i = 0; i < 5; i++) {
		char p[32];
		snprintf(p, sizeof p, "record-%d", i);
		assert_int_equal(segq_append(q, p, strlen(p), 10, 1000 + i, err, sizeof err), 0);
	}
	struct buf b;
	buf_init(&b, 1 << 20);
	struct segq_hdr h;
	struct segq_pos pos;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(segq_peek(q, &b, &h, &pos), 0);
		char want[32];
		snprintf(want, sizeof want, "record-%d", i);
		assert_string_equal(b.data, want);
		assert_int_equal(segq_ack(q, &pos, &h), 0);
	}
	/* Peeked but not acknowledged: resent after a restart. */
	assert_int_equal(segq_peek(q, &b, &h, &pos), 0);
	struct segq_stats st;
	segq_get_stats(q, &st);
	assert_int_equal(st.pending_records, 3);
	assert_int_equal(st.pending_samples, 30);
	segq_close(q);
	assert_int_equal(segq_open(&q, qdir, 4u << 20, err, sizeof err), 0);
	segq_get_stats(q, &st);
	assert_int_equal(st.pending_records, 3);
	for (int i = 2; i < 5; i++) {
		assert_int_equal(segq_peek(q, &b, &h, &pos), 0);
		char want[32];
		snprintf(want, sizeof want, "record-%d", i);
		assert_string_equal(b.data, want);
		assert_int_equal(h.max_t_ms, 1000 + i);
		assert_int_equal(segq_ack(q, &pos, &h), 0);
	}
	assert_int_equal(segq_peek(q, &b, &h, &pos), GPULSE_ENOENT);
	/* A stale position (acknowledged already) changes nothing. */
	assert_int_equal(segq_ack(q, &pos, &h), 0);
	segq_get_stats(q, &st);
	assert_int_equal(st.pending_records, 0);
	segq_close(q);
	buf_free(&b);
}

static void test_queue_torn_tail(void **state)
{
	(void)state;
	struct segq *q = NULL;
	char err[256];
	assert_int_equal(segq_open(&q, qdir, 4u << 20, err, sizeof err), 0);
	assert_int_equal(segq_append(q, "whole", 5, 1, 1, err, sizeof err), 0);
	assert_int_equal(segq_append(q, "torn-record", 11, 1, 2, err, sizeof err), 0);
	segq_close(q);
	/* Cut the last record in the middle, as a crash during write leaves it. */
	char path[512];
	snprintf(path, sizeof path, "%s/0000000000000001.seg", qdir);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size - 4), 0);
	assert_int_equal(segq_open(&q, qdir, 4u << 20, err, sizeof err), 0);
	struct segq_stats s;
	segq_get_stats(q, &s);
	assert_int_equal(s.corrupt_records_total, 1);
	assert_int_equal(s.pending_records, 1);
	struct buf b;
	buf_init(&b, 1 << 20);
	struct segq_hdr h;
	struct segq_pos pos;
	assert_int_equal(segq_peek(q, &b, &h, &pos), 0);
	assert_string_equal(b.data, "whole");
	assert_int_equal(segq_ack(q, &pos, &h), 0);
	/* Appends go on after the cut, on a record boundary. */
	assert_int_equal(segq_append(q, "after", 5, 1, 3, err, sizeof err), 0);
	assert_int_equal(segq_peek(q, &b, &h, &pos), 0);
	assert_string_equal(b.data, "after");
	segq_close(q);
	buf_free(&b);
}

static void test_queue_bound(void **state)
{
	(void)state;
	struct segq *q = NULL;
	char err[256];
	uint64_t max = SEGQ_MIN_MAX_BYTES;
	assert_int_equal(segq_open(&q, qdir, max, err, sizeof err), 0);
	char *p = calloc(1, 20000);
	int n = 0;
	for (; n < 200; n++)
		assert_int_equal(segq_append(q, p, 20000, 5, n, err, sizeof err), 0);
	struct segq_stats s;
	segq_get_stats(q, &s);
	assert_true(s.bytes <= max);
	assert_true(s.dropped_records_total > 0);
	/* Nothing lost without being counted. */
	assert_int_equal(s.dropped_records_total + s.pending_records, (uint64_t)n);
	assert_int_equal(s.dropped_samples_total + s.pending_samples, (uint64_t)n * 5);
	/* The oldest went: the first record left is a later one. */
	struct buf b;
	buf_init(&b, 1 << 20);
	struct segq_hdr h;
	struct segq_pos pos;
	assert_int_equal(segq_peek(q, &b, &h, &pos), 0);
	assert_true(h.max_t_ms == (int64_t)s.dropped_records_total);
	segq_close(q);
	free(p);
	buf_free(&b);
}

/* A writer killed with SIGKILL at an arbitrary point: every record whose
 * append had returned is there after reopening, in order, and whatever
 * it was in the middle of is cut, never fatal. */
static void test_queue_kill9(void **state)
{
	(void)state;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		struct segq *q = NULL;
		char err[256];
		if (segq_open(&q, qdir, 4u << 20, err, sizeof err))
			_exit(1);
		char p[4096];
		memset(p, 'x', sizeof p);
		for (uint32_t i = 0;; i++) {
			memcpy(p, &i, sizeof i);
			if (segq_append(q, p, 1000 + i % 3000, 1, i, err, sizeof err))
				_exit(1);
			if (write(fds[1], &i, sizeof i) != sizeof i)
				_exit(1);
		}
	}
	close(fds[1]);
	uint32_t last = 0, v;
	/* Let it append a few hundred records, then kill it mid-stream. */
	while (last < 300 && read(fds[0], &v, sizeof v) == sizeof v)
		last = v;
	kill(pid, SIGKILL);
	while (read(fds[0], &v, sizeof v) == sizeof v)
		last = v;  /* appends that returned before the kill */
	close(fds[0]);
	int st;
	waitpid(pid, &st, 0);
	struct segq *q = NULL;
	char err[256];
	assert_int_equal(segq_open(&q, qdir, 4u << 20, err, sizeof err), 0);
	struct buf b;
	buf_init(&b, 1 << 20);
	struct segq_hdr h;
	struct segq_pos pos;
	uint32_t want = 0;
	while (segq_peek(q, &b, &h, &pos) == 0) {
		uint32_t got;
		memcpy(&got, b.data, sizeof got);
		assert_int_equal(got, want);
		assert_int_equal(h.len, 1000 + want % 3000);
		want++;
		assert_int_equal(segq_ack(q, &pos, &h), 0);
	}
	assert_true(want >= last + 1);
	segq_close(q);
	buf_free(&b);
}

static void test_record_decode(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 1 << 16);
	assert_int_equal(segq_record_encode(&b, "payload", 7, 3, 42), 0);
	struct segq_hdr h;
	assert_int_equal(segq_record_decode((const uint8_t *)b.data, b.len, &h), 0);
	assert_int_equal(h.len, 7);
	assert_int_equal(h.nsamples, 3);
	for (size_t cut = 0; cut < b.len; cut++)
		assert_int_equal(segq_record_decode((const uint8_t *)b.data, cut, &h),
				 GPULSE_ERANGE);
	b.data[SEGQ_HDR_BYTES + 2] ^= 1;
	assert_int_equal(segq_record_decode((const uint8_t *)b.data, b.len, &h), GPULSE_EPARSE);
	b.data[0] ^= 1;
	assert_int_equal(segq_record_decode((const uint8_t *)b.data, b.len, &h), GPULSE_EPARSE);
	buf_free(&b);
}

static void expect_config_error(const char *yml, const char *want)
{
	struct gpulse_config *c = malloc(sizeof *c);
	config_defaults(c);
	char err[512] = "";
	assert_int_not_equal(config_parse(c, yml, strlen(yml), "t.yml", err, sizeof err), 0);
	if (!strstr(err, want))
		fail_msg("error \"%s\" does not say \"%s\"", err, want);
	free(c);
}

static void test_config(void **state)
{
	(void)state;
	const char *ok = "remote_write:\n"
			 "  - url: http://127.0.0.1:9090/api/v1/write\n"
			 "    name: central\n"
			 "    headers: {X-Scope-OrgID: a}\n"
			 "    basic_auth: {username: u, password: p}\n"
			 "    write_relabel_configs:\n"
			 "      - source_labels: [__name__]\n"
			 "        regex: 'gpulse_.*'\n"
			 "        action: keep\n"
			 "    queue_config: {max_samples_per_send: 100, batch_send_deadline: 1s}\n";
	struct gpulse_config *c = malloc(sizeof *c);
	config_defaults(c);
	char err[512] = "";
	assert_int_equal(config_parse(c, ok, strlen(ok), "t.yml", err, sizeof err), 0);
	assert_int_equal(c->nremote_write, 1);
	assert_string_equal(c->remote_write[0].name, "central");
	assert_int_equal(c->remote_write[0].nrelabel, 1);
	assert_string_equal(c->remote_write[0].write_relabel_configs[0].action, "keep");
	assert_string_equal(c->remote_write[0].write_relabel_configs[0].separator, ";");
	assert_int_equal(c->remote_write[0].queue_config.max_samples_per_send, 100);
	assert_int_equal(c->remote_write[0].queue_config.capacity, 10000);
	assert_string_equal(c->remote_write[0].mode, "raw");
	free(c);
	const char *sm = "remote_write:\n  - url: https://h:1/w\n    mode: summary\n"
			 "    summary: {interval: 30s, quantile: 0.99}\n"
			 "    tls_config: {server_name: central.example}\n";
	c = malloc(sizeof *c);
	config_defaults(c);
	assert_int_equal(config_parse(c, sm, strlen(sm), "t.yml", err, sizeof err), 0);
	assert_string_equal(c->remote_write[0].mode, "summary");
	assert_int_equal(c->remote_write[0].summary.interval_ns, 30000000000LL);
	assert_true(c->remote_write[0].summary.quantile == 0.99);
	assert_string_equal(c->remote_write[0].tls_config.server_name, "central.example");
	free(c);
	expect_config_error("remote_write:\n  - url: http://x/\n    bogus: 1\n", "t.yml:3:");
	expect_config_error("remote_write:\n  - url: http://x/\n    mode: sometimes\n",
			    "is not raw or summary");
	expect_config_error("remote_write:\n  - url: http://x/\n    summary: {interval: 10ms}\n",
			    "remote_write[0].summary.interval");
	expect_config_error("remote_write:\n  - url: http://x/\n    summary: {quantile: 1}\n",
			    "summary.quantile");
	expect_config_error("remote_write:\n  - url: http://x/\n  - url: http://y/\n"
			    "  - url: http://z/\n  - url: http://w/\n  - url: http://v/\n",
			    "more than 4 remote_write entries");
	expect_config_error("remote_write:\n  - url: http://x/\n    name: a\n  - url: http://y/\n"
			    "    name: a\n", "is the name of entry 0 too");
	expect_config_error("remote_write:\n  - url: ftp://x/\n", "http:// or https://");
	expect_config_error("remote_write:\n  - url: http://x/\n    write_relabel_configs:\n"
			    "      - action: explode\n", "unknown relabel action");
	expect_config_error("remote_write:\n  - url: http://x/\n    write_relabel_configs:\n"
			    "      - regex: 'a(?=b)'\n        target_label: t\n", "write_relabel_configs[0]");
	expect_config_error("remote_write:\n  - url: http://x/\n    queue_config:\n"
			    "      max_samples_per_send: 0\n", "t.yml:4:");
	expect_config_error("remote_write:\n  - url: http://x/\n    headers: {'bad header': x}\n",
			    "not an HTTP header name");
	expect_config_error("remote_write:\n  - url: http://x/\n    basic_auth: {username: u, "
			    "password: p, password_file: /f}\n", "mutually exclusive");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_decode),
		cmocka_unit_test(test_snappy_round_trip),
		cmocka_unit_test(test_relabel_actions),
		cmocka_unit_test(test_relabel_invalid),
		cmocka_unit_test_setup_teardown(test_queue_ack_reopen, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_queue_torn_tail, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_queue_bound, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_queue_kill9, setup_dir, teardown_dir),
		cmocka_unit_test(test_record_decode),
		cmocka_unit_test(test_config),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
