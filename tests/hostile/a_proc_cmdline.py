# expect: ok
# value: []
# about: reads /proc/1/cmdline and /proc/2/cmdline (bwrap and the zygote) for the sandbox's configuration
def f(ctx):
    markers = ("--ro-bind", "--tmpfs", "--setenv", "--bind", "workdirs", "memory_mb", "uids", "extra_path", "lane0")
    found = []
    for pid in (1, 2):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        found += [m for m in markers if m in text]
    return found
