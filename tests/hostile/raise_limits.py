# expect: ok
# value: True
# about: tries to raise its hard limits and to become root again
import os, resource


def f(ctx):
    refused = []
    for lim in (resource.RLIMIT_NPROC, resource.RLIMIT_AS):
        try:
            resource.setrlimit(lim, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            refused.append(False)
        except (ValueError, OSError):
            refused.append(True)
    try:
        os.setuid(0)
        refused.append(False)
    except OSError:
        refused.append(True)
    return all(refused)
