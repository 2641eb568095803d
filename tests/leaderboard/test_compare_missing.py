"""A comparison page opened without its runs (the bare /compare/ address) says which runs to give, instead of
"?a= must be a run id (a whole number), got ''"; a value that is no run id is still refused as one."""

import pytest

from leaderboard.comparison import ComparisonError, comparison_from_query


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({}, r"no runs to compare: \?a= and \?b= give their run ids"),
        ({"a": "", "b": ""}, r"no runs to compare: \?a= and \?b= give their run ids"),
        ({"a": "x", "b": "2"}, r"\?a= must be a run id \(a whole number\), got 'x'"),
    ],
)
def test_a_bare_comparison_names_what_to_give(params, said):
    # Both refusals come before any run is read, so no release is needed.
    with pytest.raises(ComparisonError, match=said):
        comparison_from_query(version=None, params=params, user=None)
