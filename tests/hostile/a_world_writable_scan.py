# expect: ok
# value: []
# about: tries to leave a file anywhere a later sample could look: /tmp, /dev/shm, /var/tmp, the other
#   lane's dirs, the parent of its own dir
import glob
import os


def f(ctx):
    written = []
    targets = ["/tmp", "/dev/shm", "/var/tmp", "..", "../..", *glob.glob("/tmp/*"), *glob.glob("/tmp/*/work")]
    for d in targets:
        if os.path.realpath(d) == os.getcwd():
            continue
        try:
            with open(os.path.join(d, "codethinker-leak"), "w") as fh:
                fh.write("x")
            written.append(d)
        except OSError:
            pass
    return written
