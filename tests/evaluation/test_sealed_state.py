"""An object whose class has its own __getstate__ or __setstate__ is recorded and replayed with its whole attribute
dict (issue 33): torch's Optimizer.__getstate__ drops its warn-once flag and its __setstate__ adds a "differentiable"
default, so an optimizer pickled the standard way never replayed equal to the recorded one, and an optimizer's step
(the Muon package's two) stayed unsealed with "the reference's own replay differs from its recording". Sealed now:
the reference's replay agrees, and a wrong answer to the step is killed by the replay. A plain class that does the
same (drops an attribute, adds another) too."""

from __future__ import annotations

import hashlib

import pytest

from benchmarks.paper2code import parse, splice
from benchmarks.services.blobs import environment_hash
from evaluation.judging.sealed import SnippetSpan, answer_replay, recording_make, snippet_key
from sandbox import Limits
from sandbox.harness import answer_span
from tests.conftest import TORCH_REQUIREMENTS, sandbox_backend_or_missing

pytestmark = pytest.mark.slow
REQUIREMENTS = TORCH_REQUIREMENTS  # the run's one torch environment (tests/conftest.py)
LIMITS = Limits(wall_seconds=240, memory_bytes=4 * 1024**3, processes=64, cpus=1.0, output_bytes=1024**2)
SOURCE = '''import torch


class Descent(torch.optim.Optimizer):
    """Gradient descent with a learning rate per group."""

    def __init__(self, params, lr):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                # <paper2code name="descend">
                p.sub_(group["lr"] * p.grad)
                # </paper2code name="descend">


class Counter:
    """Counts in steps; its pickling drops a flag and its unpickling adds another, as torch's Optimizer's does."""

    def __init__(self, step):
        self.step, self.total, self.warned = step, 0, False

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "warned"}

    def __setstate__(self, state):
        self.__dict__.update(state, seen=True)

    def add(self, times):
        # <paper2code name="count">
        self.total += self.step * times
        # </paper2code name="count">
        return self.total
'''
TEST = """import torch

import model

torch.manual_seed(0)
param = torch.nn.Parameter(torch.randn(4))
optimizer = model.Descent([param], lr=0.5)
for _ in range(2):
    param.grad = torch.randn(4)
    before = param.detach().clone()
    optimizer.step()
    torch.testing.assert_close(param.detach(), before - 0.5 * param.grad)
counter = model.Counter(3)
assert counter.add(2) == 6 and counter.add(1) == 9
"""
FILES = {"model.py": SOURCE.encode(), "paper2code_test.py": TEST.encode()}
HIDDEN = ("paper2code_test.py",)
BLOBS: dict[str, bytes] = {}
# (snippet, a wrong body): the sign of the update flipped.
WRONG = {
    "descend": '                p.add_(group["lr"] * p.grad)\n',
    "count": "        self.total -= self.step * times\n",
}


def blob_put(content: bytes) -> str:
    digest = hashlib.sha256(content).hexdigest()
    BLOBS[digest] = content
    return digest


@pytest.fixture(scope="session")
def sandbox_cache(sandbox_cache_shared):
    """torch's environment, built once for the run whichever parallel workers run this module and
    test_library_rebinding.py (tests/conftest.py: sandbox_cache_shared)."""
    return sandbox_cache_shared


@pytest.fixture(scope="module")
def recorded(sandbox_cache):
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    backend.forkserver = True
    environment = backend.environment_build(env_hash=environment_hash(REQUIREMENTS), requirements=REQUIREMENTS)
    annotated = parse(SOURCE, "model.py")
    spans = [
        SnippetSpan(snippet_key("model.py", s.index), "model.py", s.start_line, s.end_line) for s in annotated.snippets
    ]
    with backend.session(environment) as session:
        recording = recording_make(
            session=session,
            files=FILES,
            test_entry_point="paper2code_test.py",
            hidden=HIDDEN,
            snippets=spans,
            limits=LIMITS,
            store=blob_put,
        )
        yield session, annotated, recording


@pytest.mark.parametrize("name", ["descend", "count"])
def test_its_function_is_sealed_and_a_wrong_answer_killed_by_the_replay(recorded, name):
    session, annotated, recording = recorded
    [snippet] = [s for s in annotated.snippets if s.name == name]
    key = snippet_key("model.py", snippet.index)
    entry = recording["snippets"][key]
    assert entry["sealed"], entry["reason"]
    assert recording["targets"][entry["target"]]["calls"] == 2
    verdicts = {}
    for label, body in (("reference", snippet.code), ("wrong", WRONG[name])):
        replay = answer_replay(
            session=session,
            files={**FILES, "model.py": splice(annotated, snippet, body).encode()},
            hidden=HIDDEN,
            recording=recording,
            key=key,
            limits=LIMITS,
            load=BLOBS.__getitem__,
            answer=answer_span(snippet.start_line, body),
        )
        verdicts[label] = (replay.sealed, replay.difference)
    assert verdicts["reference"] == (True, ""), verdicts
    assert verdicts["wrong"][0] and verdicts["wrong"][1], verdicts


def test_the_advice_to_an_author_follows_why_the_snippet_is_unsealed():
    """The reason above (before this fix) got the advice to call the function with plain arguments, which the
    optimizer's test already did; each reason recording_make gives now gets advice of its own."""
    from submissions.validation import unsealed_advice

    replay = "the reference's own replay differs from its recording (call 1: at args[0]: no attribute warned)"
    assert "plain arguments" not in unsealed_advice(replay)
    assert "state its arguments do not carry" in unsealed_advice(replay)
    assert "seeding" in unsealed_advice("nondeterministic: two reference runs differ (call 1)")
    assert "plain arguments" in unsealed_advice("its arguments cannot be recorded: TypeError: cannot pickle")


def test_a_snippet_no_function_can_replay_is_told_to_move_its_code_not_to_add_a_test():
    """A module-level snippet was told "a test that calls its function with plain arguments would seal it", but no
    function holds it: no test can seal it. Each reason snippet_target gives now gets the advice to move the code."""
    from evaluation.judging.sealed import snippet_target
    from submissions.validation import unsealed_advice

    module_level = 'import math\n\n# <paper2code name="tau">\nTAU = math.sqrt(2.0)\n# </paper2code name="tau">\n'
    nested = (
        "def outer(x):\n"
        "    def inner(y):\n"
        '        # <paper2code name="double">\n'
        "        return 2 * y\n"
        '        # </paper2code name="double">\n'
        "    return inner(x)\n"
    )
    generator = (
        'def items(xs):\n    for x in xs:\n        # <paper2code name="each">\n        yield x\n'
        '        # </paper2code name="each">\n'
    )
    for source in (module_level, nested, generator):
        s = parse(source, "m.py").snippets[0]
        reason = snippet_target(source, SnippetSpan(snippet_key("m.py", s.index), "m.py", s.start_line, s.end_line))
        assert isinstance(reason, str), reason
        advice = unsealed_advice(reason)
        assert "plain arguments" not in advice and "moving its code" in advice, (reason, advice)
    assert "smaller arguments" in unsealed_advice("its recorded inputs would pass 1000000 bytes")
