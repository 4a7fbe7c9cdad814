"""deploy/kubernetes under "podman kube play": two pgcrew replicas of the
StatefulSet, with the ConfigMap's pgbouncer.ini and the Secret's userlist,
in front of a PostgreSQL pod named postgres (the name the ConfigMap gives).
A client works through each replica's port (what the Service balances
over), a query's cancel sent to the other replica lands ([peers]), the
probes answer, and "podman kube down" leaves nothing behind.

podman 4.3 plays Pods, Deployments and ConfigMaps only, so the manifests are
checked as they are (selectors, ports, probes, [peers] against the replica
names) and then played in the shape podman takes, each change a stand-in
for what Kubernetes does:
  * the StatefulSet: one Pod per replica, named as Kubernetes names them
    (pgcrew-0, pgcrew-1), PEER_ID given as the pod name the downward API
    would give;
  * the Secret: a ConfigMap of the same data (podman 4.3 has no Secret
    kind), mounted where the Secret is;
  * the Services: podman has none; each replica's ports are published on
    the host instead, and [peers] names the pods as podman's DNS knows
    them (pgcrew-0 rather than pgcrew-0.pgcrew-peers);
  * the probes and preStop: podman 4.3 would run them inside the image
    (with curl, which it has not) or not at all; the test calls the probe
    endpoints itself;
  * volumes: podman 4.3 makes a named volume of each ConfigMap volume and
    emptyDir, shared by every pod that names it (two replicas would share
    one /run/pgcrew and its Unix socket) and kept by "kube down"; so each
    gets a name of this run (the emptyDir one per pod), and after "kube
    down" the test removes exactly those volumes and checks that nothing
    else is left."""

import copy
import pathlib
import time

import psycopg
import pytest
import yaml

import pgwire
import podman as pm

DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
PASSWORD = "change-me"                       # secret.yaml's example
FILES = ("configmap.yaml", "secret.yaml", "service.yaml", "statefulset.yaml", "pdb.yaml")


def manifests():
    docs = []
    for f in FILES:
        docs += [d for d in yaml.safe_load_all((DEPLOY / f).read_text()) if d]
    return docs


def one(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in found])
    return found[0]


def test_manifests_hold_together():
    docs = manifests()
    sts = one(docs, "StatefulSet")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    spec = sts["spec"]["template"]["spec"]
    c = spec["containers"][0]
    ports = {p["name"] for p in c["ports"]}
    assert sts["spec"]["replicas"] == 2
    for svc in [d for d in docs if d["kind"] == "Service"]:
        assert svc["spec"]["selector"].items() <= labels.items()
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= ports
    peers = one(docs, "Service", sts["spec"]["serviceName"])
    assert peers["spec"]["clusterIP"] == "None" and peers["spec"]["publishNotReadyAddresses"]
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert spec["terminationGracePeriodSeconds"] > 30
    assert spec["securityContext"]["runAsUser"] == 6432 and spec["securityContext"]["runAsNonRoot"]
    ini = one(docs, "ConfigMap")["data"]["pgbouncer.ini"]
    name, svc = sts["metadata"]["name"], sts["spec"]["serviceName"]
    for i in range(sts["spec"]["replicas"]):
        assert f"{i + 1} = host={name}-{i}.{svc} port=5432" in ini


def podman_shape(docs):
    """The manifests as podman 4.3 plays them (see the module's text), the
    host ports of each replica [(pod, port, metrics_port)], and the names
    of the volumes podman will make."""
    out, replicas, volumes = [], [], []
    sts = one(docs, "StatefulSet")
    cm = copy.deepcopy(one(docs, "ConfigMap"))
    svc = sts["spec"]["serviceName"]
    cm["data"]["pgbouncer.ini"] = cm["data"]["pgbouncer.ini"].replace(f".{svc} ", " ")
    cm["metadata"]["name"] = f"{pm.RUN}-{cm['metadata']['name']}"
    out.append(cm)
    secret = one(docs, "Secret")
    out.append({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"{pm.RUN}-{secret['metadata']['name']}"},
                "data": dict(secret["stringData"])})
    volumes += [out[0]["metadata"]["name"], out[1]["metadata"]["name"]]
    for i in range(sts["spec"]["replicas"]):
        name = f"{sts['metadata']['name']}-{i}"
        spec = copy.deepcopy(sts["spec"]["template"]["spec"])
        spec["hostname"] = name
        port, mport = pm.free_port(), pm.free_port()
        for c in spec["containers"]:
            c["image"] = pm.IMAGE
            for k in ("readinessProbe", "livenessProbe", "lifecycle"):
                c.pop(k, None)
            c["env"] = [{"name": e["name"], "value": name} if e["name"] == "PEER_ID" else e for e in c["env"]]
            for p in c["ports"]:
                p["hostPort"] = port if p["name"] == "postgres" else mport
                p["hostIP"] = pm.HOST
        renamed = {}
        for v in spec["volumes"]:
            if "secret" in v:
                v["configMap"] = {"name": f"{pm.RUN}-{v.pop('secret')['secretName']}"}
            elif "configMap" in v:
                v["configMap"]["name"] = f"{pm.RUN}-{v['configMap']['name']}"
            if "emptyDir" in v:
                renamed[v["name"]] = v["name"] = f"{pm.RUN}-{name}-{v['name']}"
                volumes.append(v["name"])
        for c in spec["containers"]:
            for m in c["volumeMounts"]:
                m["name"] = renamed.get(m["name"], m["name"])
        out.append({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "labels": sts["spec"]["template"]["metadata"]["labels"]},
                    "spec": spec})
        replicas.append((name, port, mport))
    out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "postgres"},
                "spec": {"containers": [{"name": "postgres", "image": pm.PG_IMAGE,
                                         "env": [{"name": "POSTGRES_USER", "value": "app"},
                                                 {"name": "POSTGRES_PASSWORD", "value": PASSWORD}]}]}})
    return out, replicas, volumes


@pytest.fixture
def played(tmp_path, net):
    docs, replicas, volumes = podman_shape(manifests())
    f = tmp_path / "kube.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    before = set(pm.podman("ps", "-a", "--format", "{{.Names}}").stdout.split())
    r = pm.podman("kube", "play", "--network", net, str(f), check=False, timeout=300)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        yield replicas
    finally:
        for name, _, _ in replicas:
            print(f"---- logs of {name}-pgcrew ----\n{pm.logs(f'{name}-pgcrew')[-3000:]}")
        r = pm.podman("kube", "down", str(f), check=False, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        kept = set(pm.podman("volume", "ls", "--format", "{{.Name}}").stdout.split()) & set(volumes)
        if kept:
            print(f"kube down kept the volumes {sorted(kept)} (podman 4.3 does); removing them")
            pm.podman("volume", "rm", *kept, timeout=60)
        after = set(pm.podman("ps", "-a", "--format", "{{.Names}}").stdout.split())
        pods = pm.podman("pod", "ps", "--format", "{{.Name}}").stdout.split()
        left = (after - before) | {p for p in pods if p in {n for n, _, _ in replicas} | {"postgres"}}
        left |= set(pm.podman("volume", "ls", "--format", "{{.Name}}").stdout.split()) & set(volumes)
        assert not left, f"kube down left {left}"


def test_kube_play_clients_cancel_probes(played):
    for name, port, mport in played:
        pm.wait_status(mport, "/readyz", 200, 90)
        assert pm.http_get(mport, "/healthz") == (200, "ok\n")
    # A client through each replica (each is what the Service may pick).
    for name, port, _ in played:
        def works():
            with psycopg.connect(host=pm.HOST, port=port, dbname="postgres", user="app",
                                 password=PASSWORD, connect_timeout=5) as c:
                return c.execute("SELECT 1").fetchone() == (1,)
        pm.wait_until(works, 60, interval=0.5, what=f"a query through {name} (PostgreSQL starting)")
    (a, a_port, _), (b, b_port, _) = played
    with psycopg.connect(host=pm.HOST, port=b_port, dbname="pgbouncer", user="app",
                         password=PASSWORD, connect_timeout=5, autocommit=True) as adm:
        peers = adm.execute("SHOW PEERS").fetchall()
        assert sorted(r[0] for r in peers) == [1, 2], peers
    # A query on replica 0, its cancel sent to replica 1: it lands.
    victim = pgwire.Conn(pm.HOST, a_port)
    try:
        victim.login("app", PASSWORD, "postgres")
        assert victim.key and victim.key[1] >> 18 == 1, f"the key must name peer 1: {victim.key}"
        victim.query("SELECT pg_sleep(60)")
        time.sleep(0.5)        # let the query reach PostgreSQL; a cancel before it is a no-op
        started = time.monotonic()
        pgwire.cancel(pm.HOST, b_port, victim.key)
        msgs = victim.read_until(b"Z")
        errors = [pgwire.error_fields(p) for k, p in msgs if k == b"E"]
        assert errors and errors[0]["C"] == "57014", msgs
        assert time.monotonic() - started < 10
    finally:
        victim.close()
