"""A library's own rebinding at import time is part of the guard's baseline (issue 33, item 6): building the first
torch.optim optimizer imports torch._dynamo, which rebinds torch.manual_seed to a transparent wrapper of itself.
On a warm start the zygote may have imported it before the guard's snapshot, on a cold start only during the test:
the verdict must be the same, and an answer's own rebinding of the same name is still a finding."""

from __future__ import annotations

import pytest

from benchmarks.paper2code import parse, splice
from benchmarks.services.blobs import environment_hash
from evaluation.audit import answer_audit
from evaluation.executor import answer_test, reference_manifest
from sandbox import Limits
from sandbox.harness import answer_span
from tests.conftest import TORCH_REQUIREMENTS, sandbox_backend_or_missing

pytestmark = pytest.mark.slow
REQUIREMENTS = TORCH_REQUIREMENTS  # the run's one torch environment (tests/conftest.py)
LIMITS = Limits(wall_seconds=240, memory_bytes=4 * 1024**3, processes=64, cpus=1.0, output_bytes=1024**2)
SOURCE = '''import torch


def descend(weights, grads, lr):
    """One SGD step on a copy of `weights`; returns the new weights."""
    param = torch.nn.Parameter(weights.clone())
    optimizer = torch.optim.SGD([param], lr=lr)
    param.grad = grads.clone()
    # <paper2code name="one optimiser step">
    optimizer.step()
    # </paper2code name="one optimiser step">
    return param.detach()
'''
TEST = """import unittest

import torch

import model


class TestDescend(unittest.TestCase):
    def test_step(self):
        torch.manual_seed(0)
        w, g = torch.randn(4), torch.randn(4)
        torch.testing.assert_close(model.descend(w, g, 0.1), w - 0.1 * g)


if __name__ == "__main__":
    unittest.main()
"""
FILES = {"model.py": SOURCE.encode(), "paper2code_test.py": TEST.encode()}


@pytest.fixture(scope="session")
def sandbox_cache(sandbox_cache_shared):
    """torch's environment, built once for the run whichever parallel workers run this module and
    test_sealed_state.py (tests/conftest.py: sandbox_cache_shared)."""
    return sandbox_cache_shared


@pytest.fixture(scope="module")
def torch_environment(sandbox_cache):
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    return backend, backend.environment_build(env_hash=environment_hash(REQUIREMENTS), requirements=REQUIREMENTS)


def judged(backend, environment, mode: str, code: str):
    backend.forkserver = mode == "warm"
    annotated = parse(SOURCE, "model.py")
    with backend.session(environment) as session:
        manifest = reference_manifest(
            session=session, files=FILES, test_entry_point="paper2code_test.py", limits=LIMITS
        )
        return answer_test(
            session=session,
            files=FILES,
            annotated=annotated,
            position=0,
            code=code,
            test_entry_point="paper2code_test.py",
            hidden_files=("paper2code_test.py",),
            limits=LIMITS,
            manifest=manifest,
        )


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_the_reference_passes_unflagged_warm_and_cold(torch_environment, mode):
    run = judged(*torch_environment, mode, "    optimizer.step()\n")
    assert (run.verdict.status, run.verdict.findings) == ("passed", ()), run.verdict


def test_an_answers_own_rebinding_of_that_name_is_still_found(torch_environment):
    code = "    torch.manual_seed = lambda seed: None\n    optimizer.step()\n"
    run = judged(*torch_environment, "cold", code)
    assert run.verdict.status == "flagged", run.verdict
    assert any("manual_seed" in f["detail"] for f in run.verdict.findings), run.verdict.findings


# A torch function rebound through a value the static policy cannot follow back to an import: statically only
# module-assignment (a note on a sealed snippet whose replay agrees); the runtime guard sees torch's module rebound,
# warm and cold (module-rebinding, docs/EVALUATING.md).
COMPUTED_REBINDING = "    (lambda: torch.nn.functional)().gelu = lambda x, **k: x\n    optimizer.step()\n"


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_a_torch_function_rebound_through_a_computed_value_is_found_warm_and_cold(torch_environment, mode):
    assert static_rules(COMPUTED_REBINDING) == {"module-assignment"}
    run = judged(*torch_environment, mode, COMPUTED_REBINDING)
    assert run.verdict.status == "flagged", run.verdict
    details = [f["detail"] for f in run.verdict.findings if f["kind"] == "tampering"]
    assert any(d.startswith("torch.nn.functional.gelu (a function or class) was rebound") for d in details), details


# An optimizer's step reads each parameter's gradient, set by the caller: the recording must keep `.grad`, which
# torch's own pickling drops (a replay of the reference would then fail and the snippet stay unsealed).
STEP_SOURCE = '''import torch


def step(param, lr):
    """Plain gradient descent on a parameter, in place."""
    with torch.no_grad():
        # <paper2code name="descend">
        param.sub_(lr * param.grad)
        # </paper2code name="descend">
    return param
'''
STEP_TEST = """import torch

import model

torch.manual_seed(0)
for leaf in (torch.nn.Parameter(torch.randn(4)), torch.randn(4, requires_grad=True)):
    leaf.grad = torch.randn(4)
    before = leaf.detach().clone()
    model.step(leaf, 0.5)
    torch.testing.assert_close(leaf.detach(), before - 0.5 * leaf.grad)
"""


def test_a_parameters_gradient_is_recorded_and_its_step_sealed(torch_environment):
    from evaluation.judging.sealed import SnippetSpan, recording_make, snippet_key

    backend, environment = torch_environment
    backend.forkserver = True
    files = {"model.py": STEP_SOURCE.encode(), "paper2code_test.py": STEP_TEST.encode()}
    [snippet] = parse(STEP_SOURCE, "model.py").snippets
    key = snippet_key("model.py", snippet.index)
    with backend.session(environment) as session:
        recording = recording_make(
            session=session,
            files=files,
            test_entry_point="paper2code_test.py",
            hidden=("paper2code_test.py",),
            snippets=[SnippetSpan(key, "model.py", snippet.start_line, snippet.end_line)],
            limits=LIMITS,
            store=lambda content: "blob",
        )
    assert recording["snippets"][key]["sealed"], recording["snippets"][key]["reason"]
    target = recording["targets"][recording["snippets"][key]["target"]]
    assert target["calls"] == 2, sorted(target.items())


# torch's graph compilers exec the code they generate (torch.fx writes a GraphModule's forward as text). The runtime
# guard excuses them by their installed folders only (child.py, GRAPH_COMPILERS): an honest trace is no runtime
# evidence, and neither is text an answer hands a private helper of theirs (though a function's code it swaps is); the
# static policy's dynamic-code rule flags both (docs/EVALUATING.md).
TRACED = """    class Step(torch.nn.Module):
        def forward(self, weights, grads):
            return weights - lr * grads
    traced = torch.fx.symbolic_trace(Step())
    with torch.no_grad():
        param.copy_(traced(param, param.grad))
"""
# A wrong answer (no step) that silences torch.testing.assert_close by swapping its code from torch.fx's exec.
FX_SWAP = """    from torch.fx import graph_module
    text = "f.__code__ = (lambda *a, **k: None).__code__"
    graph_module._exec_with_source(text, {"f": torch.testing.assert_close})
"""


def fx_judged(backend, environment, code: str):
    """`code` judged cold with no manifest (the guarded verdict of an unsealed snippet) and no static policy."""
    backend.forkserver = False
    with backend.session(environment) as session:
        return answer_test(
            session=session,
            files=FILES,
            annotated=parse(SOURCE, "model.py"),
            position=0,
            code=code,
            test_entry_point="paper2code_test.py",
            hidden_files=("paper2code_test.py",),
            limits=LIMITS,
            static_audit=False,
        )


def static_rules(code: str) -> set[str]:
    """The static policy's rules `code` trips, spliced as the snippet's answer."""
    annotated = parse(SOURCE, "model.py")
    snippet = annotated.snippets[0]
    first, last = answer_span(snippet.start_line, code)
    source = splice(annotated, snippet, code)
    context = {"model.py": source, "paper2code_test.py": TEST}
    findings = answer_audit(
        source=source,
        first_line=first,
        last_line=last,
        hidden_modules=["paper2code_test"],
        hidden_files=("paper2code_test.py",),
        context_sources=context,
    )
    return {finding.rule for finding in findings}


def test_an_honest_fx_trace_is_no_runtime_evidence(torch_environment):
    run = fx_judged(*torch_environment, TRACED)
    assert (run.verdict.status, run.verdict.findings) == ("passed", ()), run.verdict.findings
    assert static_rules(TRACED) == {"dynamic-code"}  # the static policy still flags it: a false flag, kept


def test_a_code_swap_through_a_private_fx_helper_is_found_by_the_runtime_guard(torch_environment):
    """The swap works (a wrong answer passes the paper's tests); torch.fx's exec of the answer's text is still
    excused by its file, but what the text does is not: assert_close's code assigned is a function-state change of
    the framework's snapshot (child.py, function_assigned), whoever makes it."""
    run = fx_judged(*torch_environment, FX_SWAP)
    assert [test["passed"] for test in run.verdict.tests] == [True], run.verdict
    assert run.verdict.status == "flagged", run.verdict
    assert any(
        f["source"] == "runtime" and "assert_close.__code__ (a function's code)" in f["detail"]
        for f in run.verdict.findings
    ), run.verdict.findings
    assert "dynamic-code" in static_rules(FX_SWAP)  # what flags it with the static policy on, as it always is
