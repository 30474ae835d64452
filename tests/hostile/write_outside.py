# expect: ok
# value: True
# about: tries to overwrite a file outside the sandbox, write into the project and /etc
def f(ctx):
    blocked = []
    for path in (
        ctx["sentinel"],
        ctx["sentinel_dir"] + "/new.txt",
        "/etc/codethinker-pwned",
        ctx["project"] + "/pwned.txt",
    ):
        try:
            with open(path, "w") as fh:
                fh.write("pwned")
            blocked.append(False)
        except OSError:
            blocked.append(True)
    return all(blocked)
