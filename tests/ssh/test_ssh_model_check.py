"""`run`'s base-model probe over a real sshd: it looks where a job on that host would, in
the host's own Hugging Face cache and directories (the sessions' home, not the test's)."""

from __future__ import annotations

from tests.helpers.project import cached_model

from overbrainer.train import model_check


def probe(bench, model: str) -> model_check.Found:
    done = bench.executor.host.run(
        model_check.probe_script("/no/venv/bin/python", model), input=b"\n", timeout=60
    )
    assert done.code == 0, done.stderr
    return model_check.parse(done.text())


def test_the_host_s_cache_and_directories_are_what_counts(bench, sshd):
    cached_model(sshd.home, "Org/There")
    found = probe(bench, "Org/There")
    assert (found.where, found.ok) == ("cache", True)
    model = sshd.home / "models" / "mine"
    model.mkdir(parents=True)
    assert probe(bench, str(model)).facts == {"where": "dir", "ok": False, "exists": True}
    (model / "config.json").write_text("{}")
    assert (probe(bench, str(model)).where, probe(bench, str(model)).ok) == ("dir", True)
    assert probe(bench, "~/models/nowhere").facts == {"where": "dir", "ok": False, "exists": False}
