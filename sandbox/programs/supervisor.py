# The harness's supervisor (sandbox/harness.py, whose docstring holds the threat model): the only
# holder of the nonce; prints the completion line after the test process is gone. A program, not a module to
# import: the sandbox runs it as the harness file, after the constants harness.HARNESS_SOURCE puts before it.
# Standard library only.

import base64, os, select, sys

# Put before this text by harness.HARNESS_SOURCE (declared here for the type checker; an annotation binds nothing).
CHILD: str
RECORDS_MAX: int
TESTS_MAX: int
DETAILS_MAX: int


def nondumpable():
    """No process of the same user may read this one's memory or /proc files (ptrace access needs dumpable)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception as exc:
        print(f"rcb-harness: cannot make the supervisor non-dumpable: {exc}", file=sys.stderr)


def child_in_process(entry, spec, report_w, key_r):
    """The test process of a warm start: CHILD run here as a fresh interpreter would run it, with the same argv."""
    sys.argv = ["-c", entry, spec, str(report_w), str(key_r)]
    code = 1
    try:
        # The fork server compiled CHILD once for every item (RCB_CHILD: its source and code); anything else compiles.
        child = globals().get("RCB_CHILD")
        program = child[1] if child and child[0] == CHILD else compile(CHILD, "<string>", "exec", dont_inherit=True)
        exec(program, {"__name__": "__main__", "__builtins__": __builtins__})
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def main():
    entry, spec = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "{}"
    report_r, report_w = os.pipe()
    key_r, key_w = os.pipe()
    if globals().get("RCB_WARM"):
        # A warm start (a fork of the fork server, with its imports): the test process is a fork of this one, so it
        # is made before the nonce is read and waits for its key, which it gets once nonce and harness are gone.
        pid = os.fork()
        if pid == 0:
            os.close(report_r)
            os.close(key_w)
            child_in_process(entry, spec, report_w, key_r)
        try:
            nondumpable()
            nonce = open(".rcb-nonce").read().strip()
            os.remove(".rcb-nonce")
            os.remove(".rcb-harness.py")
            key = os.urandom(24).hex()
            os.write(key_w, key.encode())
            os.close(key_w)
        except BaseException:
            os.kill(pid, 9)
            raise
    else:
        nonce = open(".rcb-nonce").read().strip()
        os.remove(".rcb-nonce")
        os.remove(".rcb-harness.py")
        nondumpable()
        key = os.urandom(24).hex()
        os.write(key_w, key.encode())
        os.close(key_w)
        pid = os.fork()
        if pid == 0:  # a fresh interpreter: nothing of this process's memory (the nonce) reaches the test
            try:
                os.close(report_r)
                os.set_inheritable(report_w, True)
                os.set_inheritable(key_r, True)
                os.execv(sys.executable, [sys.executable, "-B", "-c", CHILD, entry, spec, str(report_w), str(key_r)])
            finally:
                os._exit(127)
    os.close(report_w)
    os.close(key_r)
    marker = b"\n" + key.encode() + b" "
    state: dict = {"buffer": b"", "finish": None, "dropped": 0, "programs": 0, "details": 0}
    records: list[str] = []
    tests: dict[str, str | None] = {}
    started: list[str] = []

    def parse():
        buffer = state["buffer"]
        while (start := buffer.find(marker)) >= 0 and (end := buffer.find(b"\n", start + len(marker))) >= 0:
            kind, _, body = buffer[start + len(marker) : end].decode("utf-8", "replace").partition(" ")
            if kind == "R":
                if len(records) < RECORDS_MAX:
                    records.append(body)
                else:
                    state["dropped"] += 1
            elif kind == "T":
                test_message(body)
            elif kind == "F":
                parts = body.split()
                if (
                    len(parts) == 3
                    and state["finish"] is None
                    and parts[2] == str(pid)
                    and parts[1].lstrip("-").isdigit()
                ):
                    state["finish"] = (parts[0], int(parts[1]))
            buffer = buffer[end:]
        state["buffer"] = buffer[start:][-65536:] if start >= 0 else buffer[-len(marker) :]

    def test_message(body):
        what, _, rest = body.partition("\t")
        if what == "P":
            state["programs"] += 1
        elif what == "S" and rest not in tests and len(started) < TESTS_MAX:
            started.append(rest)
            tests[rest] = None
        elif what == "E" and rest.count("\t") == 4 and (rest.partition("\t")[0] in tests or len(started) < TESTS_MAX):
            name = rest.partition("\t")[0]
            if name not in tests:
                started.append(name)
            if not rest.endswith("\t"):  # a detail: kept for the first DETAILS_MAX tests that have one
                state["details"] += 1
                if state["details"] > DETAILS_MAX:
                    rest = rest[: rest.rindex("\t") + 1]
            tests[name] = rest

    def read():
        chunk = os.read(report_r, 65536)
        state["buffer"] += chunk
        parse()
        return chunk

    # Until every writer is gone, or the test process is reaped and a look at the pipe after that finds nothing:
    # what it wrote before it exited is in the pipe by then, so its finish record is always read before deciding.
    wait_status = None
    while True:
        ready, _, _ = select.select([report_r], [], [], 0.05)
        if ready and not read():
            if wait_status is None:
                wait_status = os.waitpid(pid, 0)[1]
            break
        if wait_status is None:
            done, exited = os.waitpid(pid, os.WNOHANG)
            wait_status = exited if done else None
        elif not ready:
            break
    os.close(report_r)
    finish = state["finish"]
    code = os.waitstatus_to_exitcode(wait_status)
    code = code if code >= 0 else 128 - code
    if finish is None:
        status = "incomplete"
    elif finish[1] != code:
        status = "inconsistent"
    else:
        status = finish[0]
    if state["dropped"]:
        records.append(f"info\t\t\t{state['dropped']} more record(s) dropped")
    blob = base64.b64encode("\n".join(records).encode()).decode()
    # One row per test: id, outcome, body returned (1/0), sub-tests passed/total, detail; a test that started and
    # never ended (the process exited during it) is "unfinished".
    rows = [f"runs\t{state['programs']}"] + [tests[name] or f"{name}\tunfinished\t0\t0/0\t" for name in started]
    counted = base64.b64encode("\n".join(rows).encode()).decode()
    sys.stdout.flush()
    sys.stderr.flush()
    # Each blob's length goes first: a line another writer cut into (over PIPE_BUF a write is not atomic) is refused.
    os.write(1, f"\n{nonce} {status} {code} {len(blob)} {blob} {len(counted)} {counted}\n".encode())
    os._exit(code if status == "completed" else 1)


main()
