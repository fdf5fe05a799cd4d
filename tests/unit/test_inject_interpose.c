/* src/inject/interpose.c on real loaded objects: two builds of an
 * application library (tests/interpose/ip_caller.c, full RELRO and lazy
 * binding without RELRO) call ip_target of another library
 * (tests/interpose/ip_callee.c) and take the address of its ip_other;
 * after a scan their calls and the address they take go to the test's
 * functions, the callee's own call of its
 * function stays, the read-only pages stay read-only, a scan with nothing
 * new loaded does nothing, and a library loaded later is found by the
 * next scan. Each case runs in a child process (a rewrite lasts for the
 * process). */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "inject_test.h"
#include "inject/interpose.h"

typedef int ip_fn(int);

static char now_path[PATH_MAX + 64], lazy_path[PATH_MAX + 64], callee_path[PATH_MAX + 64];

static int ours(int x)
{
	return x + 100;
}

static int ours_other(int x)
{
	return x + 200;
}

static const struct interpose_entry entries[] = { { "ip_target", (void *)ours },
						  { "ip_other", (void *)ours_other } };

struct caller {
	ip_fn *call;
	ip_fn *(*address)(void);
};

static struct caller open_caller(const char *path, int bind)
{
	struct caller c;
	void *h = dlopen(path, bind | RTLD_LOCAL);
	NEED(h);
	*(void **)(&c.call) = dlsym(h, "ip_call");
	*(void **)(&c.address) = dlsym(h, "ip_address");
	NEED(c.call && c.address);
	return c;
}

/* Bytes of `path`'s mappings in this process with write permission
 * (bytes, not mappings: a page made writable joins its neighbour). */
static unsigned long writable_bytes(const char *path)
{
	FILE *f = fopen("/proc/self/maps", "re");
	NEED(f);
	char line[PATH_MAX + 128];
	unsigned long n = 0, lo, hi;
	while (fgets(line, sizeof line, f)) {
		char perms[8] = "";
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[1] == 'w' &&
		    strstr(line, path))
			n += hi - lo;
	}
	fclose(f);
	return n;
}

static void init_skipping_callee(struct interpose *ip, void *callee)
{
	const void *skip[] = { (const void *)ours, dlsym(callee, "ip_target") };
	interpose_init(ip, entries, 2, skip, 2);
}

/* Run fn in a child; it must exit 0. */
static void in_child(void (*fn)(void))
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fn();
		_exit(0);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void redirects_full_relro(void)
{
	struct caller c = open_caller(now_path, RTLD_NOW);
	void *callee = dlopen(callee_path, RTLD_NOW | RTLD_NOLOAD);
	NEED(callee);
	ip_fn *real;
	*(void **)(&real) = dlsym(callee, "ip_other");
	NEED(c.call(1) == 2 && c.address() == real);
	unsigned long before = writable_bytes("libip_caller_now.so");
	struct interpose ip;
	init_skipping_callee(&ip, callee);
	/* A JUMP_SLOT and a GLOB_DAT entry. */
	NEED(interpose_scan(&ip) == 2);
	NEED(ip.patched == 2 && ip.failed == 0 && ip.scans == 1 && ip.objects > 2);
	NEED(c.call(1) == 101);
	NEED(c.address() == ours_other);
	/* The callee's own call of its function is its own, and the RELRO
	 * page is read-only again. */
	int (*self)(int);
	*(void **)(&self) = dlsym(callee, "ip_callee_self");
	NEED(self && self(1) == 2);
	NEED(before > 0 && writable_bytes("libip_caller_now.so") == before);
	/* Nothing loaded since: nothing to do. */
	NEED(interpose_scan(&ip) == 0 && ip.scans == 1 && ip.patched == 2);
}

static void test_redirects_full_relro(void **state)
{
	(void)state;
	if (!interpose_supported())
		skip();
	in_child(redirects_full_relro);
}

static void redirects_lazy_and_later(void)
{
	struct caller now = open_caller(now_path, RTLD_NOW);
	void *callee = dlopen(callee_path, RTLD_NOW | RTLD_NOLOAD);
	NEED(callee);
	struct interpose ip;
	init_skipping_callee(&ip, callee);
	NEED(interpose_scan(&ip) == 2);
	NEED(now.call(2) == 102);
	/* Loaded after the first scan, bound lazily and not called yet (its
	 * entry still points at the PLT's resolver): the next scan finds it. */
	struct caller lazy = open_caller(lazy_path, RTLD_LAZY);
	int n = interpose_scan(&ip);
	NEED(n == 2 && ip.scans == 2);
	NEED(lazy.call(3) == 103 && lazy.address() == ours_other);
	/* The first library's entries were ours already: left. */
	NEED(ip.patched == 4);
}

static void test_redirects_lazy_and_later(void **state)
{
	(void)state;
	if (!interpose_supported())
		skip();
	in_child(redirects_lazy_and_later);
}

/* With no skip list the callee is scanned too: its own call of the
 * function it defines is not an import and stays. */
static void leaves_definitions(void)
{
	void *callee = dlopen(callee_path, RTLD_NOW | RTLD_LOCAL);
	NEED(callee);
	struct interpose ip;
	interpose_init(&ip, entries, 2, NULL, 0);
	NEED(interpose_scan(&ip) == 0);
	int (*self)(int);
	*(void **)(&self) = dlsym(callee, "ip_callee_self");
	NEED(self && self(5) == 6);
}

static void test_leaves_definitions(void **state)
{
	(void)state;
	if (!interpose_supported())
		skip();
	in_child(leaves_definitions);
}

/* Scans while another thread loads, calls and unloads a library that
 * imports the function: an object is written only once loaded whole
 * (never one the loader is still relocating), nothing fails, and once
 * the loading stops a scan redirects the library left loaded. */
static atomic_int churn_stop;

static void *churn(void *arg)
{
	(void)arg;
	while (!atomic_load(&churn_stop)) {
		void *h = dlopen(lazy_path, RTLD_NOW | RTLD_LOCAL);
		NEED(h);
		int (*call)(int);
		*(void **)(&call) = dlsym(h, "ip_call");
		int r = call(1);
		NEED(r == 2 || r == 101); /* the real function, or ours */
		dlclose(h);
	}
	return NULL;
}

static void scans_beside_dlopen(void)
{
	void *callee = dlopen(callee_path, RTLD_NOW | RTLD_LOCAL);
	NEED(callee);
	struct interpose ip;
	init_skipping_callee(&ip, callee);
	pthread_t t;
	NEED(pthread_create(&t, NULL, churn, NULL) == 0);
	for (int64_t until = clock_mono_ns() + 300 * NS_PER_MS; clock_mono_ns() < until;)
		interpose_scan(&ip);
	atomic_store(&churn_stop, 1);
	NEED(pthread_join(t, NULL) == 0);
	NEED(ip.failed == 0 && ip.scans > 1);
	struct caller now = open_caller(now_path, RTLD_NOW);
	NEED(interpose_scan(&ip) >= 2);
	NEED(now.call(1) == 101);
}

static void test_scans_beside_dlopen(void **state)
{
	(void)state;
	if (!interpose_supported())
		skip();
	in_child(scans_beside_dlopen);
}

int main(void)
{
	if (!inject_test_path("interpose/libip_caller_now.so", now_path, sizeof now_path) ||
	    !inject_test_path("interpose/libip_caller_lazy.so", lazy_path, sizeof lazy_path) ||
	    !inject_test_path("interpose/libip_callee.so", callee_path, sizeof callee_path)) {
		printf("test_inject_interpose: the test libraries were not built: skipped\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redirects_full_relro),
		cmocka_unit_test(test_redirects_lazy_and_later),
		cmocka_unit_test(test_leaves_definitions),
		cmocka_unit_test(test_scans_beside_dlopen),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
