# The agent container's command server (sandbox/docker_agent.py, whose docstring holds the threat model;
# sandbox/docker_channel.py is the worker's end): one `docker exec -i` per agent container runs it as
# root in the image's own Python (`python3 -I -S`), and every job of the container's commands (the copy-in and the
# command, the end step) is spawned by it instead of a `docker exec` each. A program, not a module to import.
# Standard library only.
#
# Frames both ways: kind (1 byte), job (4 bytes), length (4 bytes), then `length` bytes. The worker sends S (spawn:
# JSON, below), I (stdin bytes), C (close stdin) and K (start a job that waits now); this server sends R (ready,
# once), O and E (the job's stdout and stderr, at most `cap` + 1 bytes each: the rest is read and dropped), X (the
# job's exit status, 128 + the signal for a killed one, as `docker exec` reports it), D (the job's output closed:
# nothing of it holds its pipes any more) and F (the job could not start: why). A spawn `after` another job waits
# for that job's exit or a K, whichever comes first (the command's end step: no round trip to the worker between the
# command and its end). It exits when the worker's side closes.
#
# A job runs in a process forked from this server (a spare) that holds only the job's three pipes and waits for its
# spec, then takes the job's uid and gid (its gid its only group), its own session, its folder and its variables,
# and executes its argv (or, for the image's Python launcher, its code in this very interpreter: no new interpreter's
# start). Spares are forked in advance while no job runs, one for the next root job (the end step) and one for the
# next other job (the command), and a job that asks for it (`spare`, the command's) leaves a root spare forked
# before anything of it runs: a command holding every process slot cannot keep its end step from starting. While a
# command and its end step run no other spare is forked: the end step counts the processes it leaves.

import json, os, select, signal, struct, sys

HEADER = struct.Struct(">cII")
CHUNK = 1 << 16
PENDING_MAX = 1 << 20  # stdin bytes held for one job before this server stops reading the worker's frames


def frame(kind, job, data=b""):
    data = HEADER.pack(kind, job, len(data)) + data
    while data:
        data = data[os.write(1, data) :]


class Spare:
    """A forked process that waits for a job's spec on `spec` and then becomes the job."""

    def __init__(self):
        self.pid = None
        ends = [os.pipe() for _ in range(4)]  # spec, stdin, stdout, stderr: (read, write) each
        try:
            self.pid = os.fork()
        except OSError:  # no process slot (EAGAIN): the caller says why
            for read, write in ends:
                os.close(read)
                os.close(write)
            raise
        (spec_r, spec_w), (in_r, in_w), (out_r, out_w), (err_r, err_w) = ends
        if self.pid == 0:
            try:
                become(spec_r, in_r, out_w, err_w)
            except BaseException as exc:
                os.write(2, f"rcb-command-server: the job could not start: {exc!r}\n".encode())
            os._exit(127)
        for fd in (spec_r, in_r, out_w, err_w):
            os.close(fd)
        self.spec, self.stdin, self.stdout, self.stderr = spec_w, in_w, out_r, err_r


def become(spec_r, in_r, out_w, err_w):
    """In the spare: keep nothing of the server's, read the spec (EOF: the server is gone, so is the spare), run it."""
    for fd, target in ((in_r, 0), (out_w, 1), (err_w, 2)):
        os.dup2(fd, target)
    os.closerange(3, spec_r)
    os.closerange(spec_r + 1, os.sysconf("SC_OPEN_MAX"))
    chunks = []
    while chunk := os.read(spec_r, CHUNK):
        chunks.append(chunk)
    os.close(spec_r)
    if not chunks:
        os._exit(0)
    spec = json.loads(b"".join(chunks))
    for number in (signal.SIGPIPE, signal.SIGXFSZ):  # what Python ignores, a fresh process has by default
        signal.signal(number, signal.SIG_DFL)
    os.setsid()
    os.setgroups([spec["gid"]])  # as `docker exec` sets them: the job's group, no other
    os.setresgid(spec["gid"], spec["gid"], spec["gid"])
    os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    os.chdir(spec["cwd"])
    if spec.get("code") is not None:
        os.environ.clear()
        os.environ.update(spec["env"])
        sys.argv = ["-c", *spec["argv"]]
        code = 0
        try:
            exec(compile(spec["code"], "<string>", "exec"), {"__name__": "__main__"})
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])


class Job:
    def __init__(self, number, spare, cap):
        self.number, self.pid, self.cap = number, spare.pid, cap
        self.pidfd: int | None = os.pidfd_open(spare.pid)
        self.stdin: int | None = spare.stdin
        self.pending, self.closing = bytearray(), False
        os.set_blocking(self.stdin, False)
        self.outputs = {spare.stdout: b"O", spare.stderr: b"E"}
        self.sent = {b"O": 0, b"E": 0}
        self.exited = False

    def write(self):
        """As much of the pending stdin as the pipe takes; a reader that is gone drops the rest."""
        if self.stdin is None:
            self.pending.clear()
            return
        try:
            while self.pending:
                del self.pending[: os.write(self.stdin, self.pending[:CHUNK])]
        except BlockingIOError:
            return
        except OSError:
            self.pending.clear()
        if self.closing or not self.pending and self.exited:
            self.stdin_close()

    def stdin_close(self):
        if self.stdin is not None:
            os.close(self.stdin)
            self.stdin = None
        self.pending.clear()

    def read(self, fd):
        data = os.read(fd, CHUNK)
        kind = self.outputs[fd]
        if not data:
            os.close(fd)
            del self.outputs[fd]
            return
        room = self.cap + 1 - self.sent[kind] if self.cap is not None else len(data)
        if room > 0:
            frame(kind, self.number, data[:room])
            self.sent[kind] += min(room, len(data))

    def reap(self):
        _, status = os.waitpid(self.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        frame(b"X", self.number, str(128 - code if code < 0 else code).encode())
        if self.pidfd is not None:
            os.close(self.pidfd)
        self.pidfd, self.exited = None, True
        self.stdin_close()

    @property
    def done(self):
        return self.exited and not self.outputs


class Server:
    def __init__(self):
        self.jobs, self.waiting, self.received = {}, {}, bytearray()
        # forked in advance, one of each at most (the end step counts the processes it leaves)
        self.spares: dict[str, Spare | None] = {"root": None, "user": None}

    def serve(self):
        frame(b"R", 0, str(os.getpid()).encode())
        while True:
            poller = select.poll()
            roles: dict[int, Job | None] = {}
            if sum(len(job.pending) for job in self.jobs.values()) < PENDING_MAX:
                poller.register(0, select.POLLIN)
                roles[0] = None
            for job in self.jobs.values():
                for fd in job.outputs:
                    poller.register(fd, select.POLLIN)
                    roles[fd] = job
                if job.pidfd is not None:
                    poller.register(job.pidfd, select.POLLIN)
                    roles[job.pidfd] = job
                if job.pending and job.stdin is not None:
                    poller.register(job.stdin, select.POLLOUT)
                    roles[job.stdin] = job
            events = poller.poll()
            # Output before exits (what a job printed is sent before its exit status), the worker's frames last (a
            # spawn's new pipes may take the number of a pipe closed here, whose event is then handled before).
            events.sort(key=lambda event: order(roles[event[0]], event[0]))
            for fd, _ in events:
                job = roles[fd]
                if job is None:
                    data = os.read(0, CHUNK)
                    if not data:
                        return
                    self.received += data
                    self.frames_handle()
                elif fd in job.outputs:
                    job.read(fd)
                elif fd == job.pidfd:
                    job.reap()
                    for number in [n for n, spec in self.waiting.items() if spec["after"] == job.number]:
                        self.spawn(number, self.waiting.pop(number))
                elif fd == job.stdin:
                    job.write()
            for number in [number for number, job in self.jobs.items() if job.done]:
                frame(b"D", number)
                del self.jobs[number]
            if not self.jobs and not self.waiting:
                self.prefork()

    def prefork(self):
        """Between commands, fork what the next command and its end step will take, off their way."""
        for kind in self.spares:
            if self.spares[kind] is None:
                try:
                    self.spares[kind] = Spare()
                except OSError:
                    pass

    def frames_handle(self):
        """Handle every whole frame received so far."""
        received = self.received
        while len(received) >= HEADER.size:
            kind, number, length = HEADER.unpack_from(received)
            if len(received) < HEADER.size + length:
                break
            data = bytes(received[HEADER.size : HEADER.size + length])
            del received[: HEADER.size + length]
            job = self.jobs.get(number)
            if kind == b"S":
                spec = json.loads(data)
                before = self.jobs.get(spec.get("after"))
                if before is not None and not before.exited:
                    self.waiting[number] = spec
                else:
                    self.spawn(number, spec)
            elif kind == b"K" and number in self.waiting:
                self.spawn(number, self.waiting.pop(number))
            elif kind == b"I" and job is not None:
                job.pending += data
                job.write()
            elif kind == b"C" and job is not None:
                job.closing = True
                job.write()

    def spawn(self, number, spec):
        """Hand the job to the spare of its kind (forked now if there is none), then fork a root spare if the job
        asks for one."""
        kind = "root" if spec["uid"] == 0 else "user"
        try:
            taken = self.spares[kind] or Spare()
        except OSError as exc:
            frame(b"F", number, f"no process to run it: {exc}".encode())
            return
        self.spares[kind] = None
        data = json.dumps(spec).encode()
        while data:
            data = data[os.write(taken.spec, data) :]
        os.close(taken.spec)
        self.jobs[number] = job = Job(number, taken, spec.get("cap"))
        if spec.get("stdin") is False:
            job.stdin_close()
        if spec.get("spare") and self.spares["root"] is None:
            try:
                self.spares["root"] = Spare()
            except OSError:
                pass  # the end step forks its own


def order(job, fd):
    return 2 if job is None else 1 if fd == job.pidfd else 0


try:
    Server().serve()
except BrokenPipeError:
    pass
