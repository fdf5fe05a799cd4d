/* An application library calling functions of another object (as
 * PyTorch's profiler calls CUPTI): ip_target through its PLT (a
 * JUMP_SLOT entry), ip_other by taking its address (a GLOB_DAT entry).
 * Built twice, with full RELRO (-z now) and with lazy binding and no
 * RELRO. */
int ip_target(int x);
int ip_other(int x);

typedef int ip_fn(int);
__attribute__((visibility("default"))) int ip_call(int x);
__attribute__((visibility("default"))) ip_fn *ip_address(void);

int ip_call(int x)
{
	return ip_target(x);
}

ip_fn *ip_address(void)
{
	return &ip_other;
}
