# tests/gpu/inject_names_uvm.sh: the same PyTorch ops under gpulse (full mode,
# a dump; "ops") and under torch.profiler in another process ("prof OUT.json":
# the CUDA kernel names it prints, as JSON).
import json, sys
def ops():
    import torch
    a = torch.randn(1024, 1024, device="cuda"); b = torch.randn(1024, 1024, device="cuda")
    v = torch.randn(1024, device="cuda")
    for _ in range(3):
        c = a * b; d = a * 2.0; e = torch.addcmul(a, b, a, value=0.5); f = (a @ v)
        g = a.sum(); h = torch.relu(a); i = a.half() * b.half(); j = torch.softmax(a, -1)
        k = torch.nn.functional.layer_norm(a, (1024,)); l = a[:, :3].contiguous()
    torch.cuda.synchronize()
if sys.argv[1] == "ops":
    ops()
elif sys.argv[1] == "prof":
    import torch
    from torch.profiler import profile, ProfilerActivity
    torch.ones(1, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        ops()
    names = sorted({e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    json.dump(names, open(sys.argv[2], "w"))
