"""The harness's own guarantees: a sanitizer report or a hung stop fails the
test, pgcrew-only settings are kept out of PgBouncer's ini."""

import os

import pytest

import pooler as pooler_mod


def test_sanitizer_report_fails_stop(pg15, make_pooler):
    p = make_pooler(pg15)
    report = os.path.join(p.workdir, "asan.12345")
    with open(report, "w") as f:
        f.write("==12345==ERROR: LeakSanitizer: detected memory leaks\n")
    with pytest.raises(AssertionError) as err:
        p.stop()
    assert "LeakSanitizer" in str(err.value)
    os.unlink(report)
    p.proc = None  # already stopped; teardown has nothing more to check


def test_pgcrew_only_settings_filtered(pg15, make_pooler, pooler_kind):
    p = make_pooler(pg15, settings={"workers": 1}, start=False)
    p.write_config()
    ini = open(p.ini_path).read()
    if pooler_kind == "pgbouncer":
        assert "workers" not in ini
    else:
        assert "workers = 1" in ini
    assert pooler_mod.PGCREW_ONLY_KEYS


def test_pooler_runs_as_unprivileged_user(pg15, make_pooler):
    p = make_pooler(pg15)
    uid = os.stat(f"/proc/{p.pid}").st_uid
    if os.geteuid() == 0:
        assert uid != 0
    with p.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
