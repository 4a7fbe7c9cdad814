"""Fixtures of the container tests (test/container/run.sh runs them as
root with CONTAINERS_CONF set): a podman network of this run and a
PostgreSQL 15 container on it, both removed at the end."""

import pytest

import podman as pm


@pytest.fixture(scope="session")
def net():
    name = f"{pm.RUN}-net"
    pm.podman("network", "create", name)
    yield name
    pm.podman("network", "rm", "-f", name, check=False, timeout=60)


@pytest.fixture(scope="session")
def pg(net, tmp_path_factory):
    """The PostgreSQL container: its name is its host name on the network."""
    name = f"{pm.RUN}-pg"
    env = tmp_path_factory.mktemp("pgenv") / "env"
    env.write_text(f"POSTGRES_PASSWORD={pm.PG_PASSWORD}\n")
    pm.podman("run", "-d", "--name", name, "--network", net, "--env-file", str(env), pm.PG_IMAGE)
    try:
        pm.wait_until(lambda: pm.podman("exec", name, "/usr/lib/postgresql/15/bin/pg_isready",
                                        "-h", "/tmp", "-q", check=False, timeout=20).returncode == 0,
                      60, what="PostgreSQL in its container to accept connections")
        yield name
    finally:
        pm.remove(name)


@pytest.fixture
def container():
    """Factory: container(*podman run args) starts one detached, named for
    this run; all are removed at the end of the test."""
    made = []

    def run(*args, name=None):
        name = name or f"{pm.RUN}-{len(made)}"
        made.append(name)
        pm.podman("run", "-d", "--name", name, *args)
        return name
    yield run
    for name in made:
        print(f"---- logs of {name} ----\n{pm.logs(name)[-3000:]}")
    pm.remove(*made)
