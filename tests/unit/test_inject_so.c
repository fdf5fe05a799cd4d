/* Tests of the built libgpulse-inject.so on a machine without a GPU (CI):
 * it exports only InitializeInjection and its versioned symbols; with
 * CUPTI missing it steps aside with exactly one log line, lets the
 * program run and exit promptly, tells a daemon so in its HELLO and
 * STATUS frames, and writes its dump. Each case runs in a child process
 * (the library keeps process-wide state). Skipped (and reported so) when
 * the library was not built: CMake builds it only where CUPTI's headers
 * are installed. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/clock.h"
#include "inject_test.h"
#include "wire/wire.h"

static char so_path[PATH_MAX + 64];

/* The library sits at <build>/src/inject/ and this test at <build>/tests/. */
static int find_so(void)
{
	return inject_test_path("../src/inject/libgpulse-inject.so", so_path, sizeof so_path);
}

static void test_exports(void **state)
{
	(void)state;
	if (!find_so())
		skip();
	void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	assert_non_null(dlsym(h, "InitializeInjection"));
	const char *(*version)(void) = NULL;
	*(void **)(&version) = dlsym(h, "gpulse_inject_version");
	assert_non_null(version);
	assert_true(strlen(version()) > 0);
	/* Nothing of the library's insides leaks into the application. */
	assert_null(dlsym(h, "agg_create"));
	assert_null(dlsym(h, "wire_encode"));
	assert_null(dlsym(h, "client_push"));
	assert_null(dlsym(h, "gpulse_strerror"));
	assert_null(dlsym(h, "str_copy"));
	dlclose(h);
}

/* Run the library in a child: environment `env` (NAME=VALUE, NULL-ended),
 * InitializeInjection, then exit(0). Returns the child's stderr in
 * err[errlen] and its exit status; *took_ns how long it ran. */
static int run_child(const char *const *env, char *err, size_t errlen, int64_t *took_ns)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	int64_t t0 = clock_mono_ns();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 2);
		close(p[0]);
		for (const char *const *e = env; *e; e++)
			putenv((char *)(uintptr_t)*e);
		void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			_exit(3);
		int (*init)(void) = NULL;
		*(void **)(&init) = dlsym(h, "InitializeInjection");
		if (!init || init() != 1)
			_exit(4);
		exit(0); /* atexit handlers: the library's exit flush and dump */
	}
	close(p[1]);
	size_t got = 0;
	for (;;) {
		ssize_t r = read(p[0], err + got, errlen - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == errlen - 1)
			break;
	}
	err[got] = '\0';
	close(p[0]);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	*took_ns = clock_mono_ns() - t0;
	return status;
}

static int count_lines(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_cupti_missing_steps_aside(void **state)
{
	(void)state;
	if (!find_so())
		skip();
	char dump[64];
	snprintf(dump, sizeof dump, "/tmp/gpulse-test-inject-%d.json", (int)getpid());
	unlink(dump);
	char dump_env[96];
	snprintf(dump_env, sizeof dump_env, "GPULSE_INJECT_DUMP=%s", dump);
	const char *env[] = { "GPULSE_CUPTI_PATH=/nonexistent/libcupti.so",
			      "GPULSE_SOCKET=/nonexistent/inject.sock", dump_env, NULL };
	char err[4096];
	int64_t took;
	int status = run_child(env, err, sizeof err, &took);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* One line, saying why. */
	assert_int_equal(count_lines(err, "gpulse-inject:"), 1);
	assert_non_null(strstr(err, "stepping aside"));
	assert_non_null(strstr(err, "GPULSE_CUPTI_PATH"));
	/* No daemon: the exit flush does not wait for one. */
	assert_true(took < 3 * NS_PER_SEC);
	json_error_t je;
	json_t *j = json_load_file(dump, 0, &je);
	if (!j)
		fail_msg("no dump at %s: %s", dump, je.text);
	assert_true(json_is_true(json_object_get(j, "stepped_aside")));
	assert_string_equal(json_string_value(json_object_get(j, "mode")), "off");
	assert_non_null(strstr(json_string_value(json_object_get(j, "reason")), "GPULSE_CUPTI_PATH"));
	assert_int_equal(json_array_size(json_object_get(j, "kernels")), 0);
	json_decref(j);
	unlink(dump);
}

static void test_bad_settings_one_line_each(void **state)
{
	(void)state;
	if (!find_so())
		skip();
	const char *env[] = { "GPULSE_MODE=off", "GPULSE_BUDGET=lots",
			      "GPULSE_SOCKET=/nonexistent/inject.sock", NULL };
	char err[4096];
	int64_t took;
	int status = run_child(env, err, sizeof err, &took);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(count_lines(err, "gpulse-inject:"), 2);
	assert_non_null(strstr(err, "GPULSE_BUDGET=lots"));
	assert_non_null(strstr(err, "GPULSE_MODE=off"));
}

/* What the reader remembers: HELLO's pid, whether it came first, the
 * last STATUS. */
struct seen {
	uint32_t hello_pid;
	int first_is_hello, frames, statuses;
	struct wire_status status;
};

static int on_frame(int fd, unsigned type, const struct wire_msg *m, void *user)
{
	(void)fd;
	struct seen *s = user;
	if (s->frames++ == 0)
		s->first_is_hello = type == WIRE_HELLO;
	if (type == WIRE_HELLO)
		s->hello_pid = m->u.hello.pid;
	if (type == WIRE_STATUS) {
		s->status = m->u.status;
		s->statuses++;
	}
	return 0;
}

static void test_daemon_told_why(void **state)
{
	(void)state;
	if (!find_so())
		skip();
	char path[108];
	snprintf(path, sizeof path, "/tmp/gpulse-test-inject-%d.sock", (int)getpid());
	unlink(path);
	int lfd = inject_test_listen(path);
	assert_true(lfd >= 0);
	char sock_env[160];
	snprintf(sock_env, sizeof sock_env, "GPULSE_SOCKET=%s", path);
	const char *env[] = { "GPULSE_CUPTI_PATH=/nonexistent/libcupti.so", sock_env, NULL };
	/* The child runs while this process accepts. */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char err[4096];
		int64_t took;
		close(lfd);
		int st = run_child(env, err, sizeof err, &took);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 9);
	}
	int fd = inject_test_accept(lfd);
	struct seen seen;
	memset(&seen, 0, sizeof seen);
	inject_test_read_frames(fd, 10, on_frame, &seen);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(seen.first_is_hello);
	assert_true(seen.hello_pid > 0 && seen.hello_pid != (uint32_t)getpid());
	assert_true(seen.statuses >= 1);
	assert_int_equal(seen.status.stepped_aside, 1);
	assert_int_equal(seen.status.mode, WIRE_MODE_OFF);
	assert_non_null(strstr(seen.status.reason, "GPULSE_CUPTI_PATH"));
	close(fd);
	close(lfd);
	unlink(path);
}

int main(void)
{
	if (!find_so()) {
		/* ctest shows this as skipped (SKIP_RETURN_CODE), not passed. */
		printf("libgpulse-inject.so was not built here (no CUPTI headers): skipped\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exports),
		cmocka_unit_test(test_cupti_missing_steps_aside),
		cmocka_unit_test(test_bad_settings_one_line_each),
		cmocka_unit_test(test_daemon_told_why),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
