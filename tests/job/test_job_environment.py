"""What a job on this machine sees of overbrainer's environment."""

from __future__ import annotations

import pytest

from overbrainer.job.localhost import job_environment

REDIRECTING = {
    "HF_ENDPOINT": "https://hub.example.invalid",
    "HTTPS_PROXY": "http://proxy.example.invalid:3128",
    "SSL_CERT_FILE": "/tmp/their-ca.pem",
    "REQUESTS_CA_BUNDLE": "/tmp/their-ca.pem",
    "PIP_INDEX_URL": "https://pypi.example.invalid/simple",
    "UV_INDEX_URL": "https://pypi.example.invalid/simple",
}


def test_what_redirects_the_jobs_requests_comes_from_the_shell_only():
    """A project's .env (merged beside the shell) cannot point the job, and the token it
    carries, at a hub, proxy, CA or package index of its choosing."""
    merged = {"HOME": "/home/u", "PATH": "/usr/bin", **REDIRECTING}
    assert job_environment(merged, shell={"HOME": "/home/u", "PATH": "/usr/bin"}) == {
        "HOME": "/home/u", "PATH": "/usr/bin"
    }
    assert job_environment(merged, shell=merged) == merged  # the user's own shell: kept


@pytest.mark.parametrize("name", ["OVERBRAINER_HF_TOKEN", "VAULT_TOKEN", "OPENAI_API_KEY",
                                  "DB_PASS", "PYTHONPATH", "AWS_SECRET_ACCESS_KEY"])
def test_secrets_and_what_is_not_allowlisted_never_reach_the_job(name):
    assert job_environment({name: "x"}, shell={name: "x"}) == {}
