/* The library whose functions tests/unit/test_inject_interpose.c
 * redirects (as CUPTI's cuptiSubscribe is): it defines ip_target and
 * ip_other, and calls ip_target itself through its own PLT (a defined
 * symbol: never redirected). */
__attribute__((visibility("default"))) int ip_target(int x);
__attribute__((visibility("default"))) int ip_other(int x);
__attribute__((visibility("default"))) int ip_callee_self(int x);

int ip_target(int x)
{
	return x + 1;
}

int ip_other(int x)
{
	return x + 2;
}

int ip_callee_self(int x)
{
	return ip_target(x);
}
