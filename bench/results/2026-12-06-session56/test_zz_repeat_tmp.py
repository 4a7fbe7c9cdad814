# temporary (not committed): repeat a flaky test to measure its rate
import pytest
from test_handover import test_idle_server_elsewhere_is_used_not_a_new_one as t


@pytest.mark.parametrize("i", range(int(__import__("os").environ.get("REPEAT_N", "60"))))
def test_rep(i, pg15, make_pooler):
    t(pg15, make_pooler)
