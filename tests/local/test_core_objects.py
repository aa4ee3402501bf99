"""ConfigMaps, Secrets and PersistentVolumeClaims on the local backend, as a kubectl user works with them: apply,
get, describe, delete, pods that use them, a pod waiting for a missing one, claims that keep data across
TrainJobs and pvc-protection."""

from __future__ import annotations

import base64
import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api.errors import InvalidObjectError, KubetrainError
from kubetrain.local.backend import LocalBackend
from kubetrain.local.store.db import Store
from kubetrain.local.supervisor.controller import Supervisor

from .conftest import container, needs_namespaces, rjob, runtime, trainjob
from .test_cli import kt, wait_for, write

Obj = dict[str, Any]
SECRET_VALUE = "hunter2-very-secret"


def cm(name: str = "cfg", **data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def secret(name: str = "creds", **string_data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": string_data}


def pvc(name: str = "data", storage: str = "1Gi") -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}}


def test_apply_reports_created_configured_unchanged_and_stores_like_the_api_server(backend: LocalBackend) -> None:
    objs = [cm(greeting="hello"), secret(password=SECRET_VALUE), pvc()]
    assert backend.apply(objs, namespace="default") == [
        "configmap/cfg created", "secret/creds created", "persistentvolumeclaim/data created"]
    assert backend.apply(objs, namespace="default") == [
        "configmap/cfg unchanged", "secret/creds unchanged", "persistentvolumeclaim/data unchanged"]
    assert backend.apply([cm(greeting="hi")], namespace="default") == ["configmap/cfg configured"]
    assert backend.apply([pvc(storage="2Gi")], namespace="default") == ["persistentvolumeclaim/data configured"]

    s = backend.get_core("Secret", "creds", "default")
    assert "stringData" not in s and s["type"] == "Opaque"
    assert base64.b64decode(s["data"]["password"]).decode() == SECRET_VALUE
    claim = backend.get_core("PersistentVolumeClaim", "data", "default")
    uid = claim["metadata"]["uid"]
    assert claim["spec"]["volumeName"] == f"pvc-{uid}"
    assert claim["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "2Gi"}}
    assert backend.get_core("ConfigMap", "cfg", "default")["metadata"]["creationTimestamp"]


def test_invalid_and_forbidden_updates_change_nothing(backend: LocalBackend) -> None:
    frozen = {**cm(a="1"), "immutable": True}
    backend.apply([frozen], namespace="default")
    with pytest.raises(InvalidObjectError, match="field is immutable when `immutable` is set"):
        backend.apply([{**cm(a="2"), "immutable": True}], namespace="default")
    assert backend.get_core("ConfigMap", "cfg", "default")["data"] == {"a": "1"}
    bad = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"pw": SECRET_VALUE}}
    with pytest.raises(InvalidObjectError) as err:
        backend.apply([bad], namespace="default")
    assert "data[pw]: not valid base64" in str(err.value) and SECRET_VALUE not in str(err.value)
    backend.apply([pvc()], namespace="default")
    with pytest.raises(InvalidObjectError, match=r"can not be less than the previous value \(1Gi\)"):
        backend.apply([pvc(storage="1Mi")], namespace="default")
    with pytest.raises(KubetrainError, match=r'persistentvolumeclaims "dat" not found .*did you mean \'data\''):
        backend.get_core("PersistentVolumeClaim", "dat", "default")


def test_secrets_are_stored_where_only_their_owner_can_read(kt_home: Path) -> None:
    store = Store()
    LocalBackend(store).apply([secret(password=SECRET_VALUE)], namespace="default")
    store.close()
    for f in kt_home.glob("state.db*"):
        assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f
    # An existing world-readable state is tightened when it is opened.
    (kt_home / "state.db").chmod(0o644)
    Store().close()
    assert stat.S_IMODE((kt_home / "state.db").stat().st_mode) == 0o600


def test_cli_get_describe_delete_like_kubectl(kt_home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "objs.yaml", cm(greeting="hello", other="x"), secret(password=SECRET_VALUE), pvc())
    assert kt("apply", "-f", f).stdout.splitlines() == [
        "configmap/cfg created", "secret/creds created", "persistentvolumeclaim/data created"]
    rows = [r.split() for r in kt("get", "configmaps").stdout.splitlines()]
    assert rows[0] == ["NAME", "DATA", "AGE"] and rows[1][:2] == ["cfg", "2"]
    out = kt("get", "secrets").stdout
    assert out.split("\n")[0].split() == ["NAME", "TYPE", "DATA", "AGE"] and "creds   Opaque   1" in out
    assert SECRET_VALUE not in out and base64.b64encode(SECRET_VALUE.encode()).decode() not in out
    rows = [r.split() for r in kt("get", "pvc", "-A").stdout.splitlines()]
    assert rows[0] == ["NAMESPACE", "NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS", "AGE"]
    assert rows[1][:3] == ["default", "data", "Bound"] and rows[1][3].startswith("pvc-")
    assert rows[1][4:7] == ["1Gi", "RWO", "<unset>"]
    assert kt("get", "cm", "-o", "name").stdout == "configmap/cfg\n"
    assert yaml.safe_load(kt("get", "cm", "cfg", "-o", "yaml").stdout)["data"] == {"greeting": "hello", "other": "x"}
    assert json.loads(kt("get", "secret", "creds", "-o", "json").stdout)["kind"] == "Secret"

    d = kt("describe", "secret", "creds").stdout
    assert f"password:  {len(SECRET_VALUE)} bytes" in d and SECRET_VALUE not in d
    assert SECRET_VALUE not in kt("describe", "secret", "creds", "-o", "yaml").stdout
    d = kt("describe", "pvc", "data").stdout
    assert "Status:        Bound" in d and f"Local path:    {kt_home}/claims/default/data-" in d
    assert "Used By:      <none>" in d
    assert len(list((kt_home / "claims" / "default").iterdir())) == 1, "a claim is bound (provisioned) at once"

    r = kt("get", "cm", "cfg", "nope", check=False)
    assert r.returncode == 1 and 'configmaps "nope" not found' in r.stderr and "cfg" in r.stdout
    assert kt("delete", "configmap", "cfg").stdout == 'configmap "cfg" deleted\n'
    assert kt("get", "cm").stderr == "No resources found in namespace default.\n"
    out = kt("delete", "-f", f, check=False)
    assert out.returncode == 1 and 'configmaps "cfg" not found' in out.stderr  # gone already; the rest are deleted
    assert 'secret "creds" deleted' in out.stdout and 'persistentvolumeclaim "data" deleted' in out.stdout
    assert not list((kt_home / "claims" / "default").iterdir()), "a claim's data goes with it (reclaim Delete)"


def test_validate_and_render_take_them_without_a_skipped_warning(kt_home: Path, tmp_path: Path) -> None:
    rt = runtime("rt", [rjob("node", [container(["true"], envFrom=[{"configMapRef": {"name": "cfg"}}])],
                             ancestor="trainer")])
    rt["metadata"]["labels"] = {"trainer.kubeflow.org/framework": "torch"}
    f = write(tmp_path / "all.yaml", cm(a="b"), secret(p="q"), pvc(), rt, trainjob("job", "rt"))
    r = kt("validate", "-f", f)
    assert "skipped" not in r.stderr and "5 object(s) valid: 0 error(s), 0 warning(s)" in r.stderr
    docs = list(yaml.safe_load_all(kt("render", "-f", f).stdout))
    assert [d["kind"] for d in docs[:3]] == ["ConfigMap", "Secret", "PersistentVolumeClaim"]
    assert any(d["kind"] == "JobSet" for d in docs)
    bad = write(tmp_path / "bad.yaml", {**cm(), "data": {"port": 8080}})
    r = kt("validate", "-f", bad, check=False)
    assert r.returncode == 1 and "data[port]: expected a string, got an integer (8080)" in r.stderr
    assert kt("apply", "-f", bad, check=False).returncode == 1
    assert kt("get", "cm").stderr.startswith("No resources found"), "nothing of an invalid file is applied"


# Pods that use them.
READ = (
    "import os, pathlib\n"
    "print('env', os.environ['GREETING'], os.environ['user'], len(os.environ['password']))\n"
    "conf, pw = pathlib.Path('/cfg/app.conf'), pathlib.Path('/sec/password')\n"
    "print('file', conf.read_text().strip(), pw.stat().st_mode & 0o777)\n"
    "p = pathlib.Path('/data/count')\n"
    "n = int(p.read_text()) + 1 if p.exists() else 1\n"
    "p.write_text(str(n))\n"
    "print('count', n)\n"
)


def user_runtime(name: str = "rt", code: str = READ) -> Obj:
    c = container(
        [sys.executable, "-c", code],
        env=[{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}}],
        envFrom=[{"secretRef": {"name": "creds"}}],
        volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}, {"name": "sec", "mountPath": "/sec"},
                      {"name": "data", "mountPath": "/data"}],
    )
    return runtime(name, [rjob("node", [c], ancestor="trainer", volumes=[
        {"name": "cfg", "configMap": {"name": "cfg"}},
        {"name": "sec", "secret": {"secretName": "creds", "defaultMode": 0o400}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
    ])])


@needs_namespaces
def test_pods_read_them_and_a_claim_keeps_data_across_trainjobs(backend: LocalBackend, tmp_path: Path) -> None:
    base = [cm(greeting="hello", **{"app.conf": "x=1"}), {**secret(password=SECRET_VALUE),
            "data": {"user": base64.b64encode(b"admin").decode()}}, pvc(), user_runtime()]
    for i in (1, 2):
        names = backend.apply([*base, trainjob(f"job{i}", "rt")], namespace="default", workdir=str(tmp_path),
                              detach=False)
        assert names[-1] == f"trainjob/job{i} created"
        assert Supervisor(backend.store, "default", f"job{i}").run()["conditions"][-1]["type"] == "Complete"
        out = "".join(backend.logs(f"job{i}", "default", step=None, follow=False))
        assert f"env hello admin {len(SECRET_VALUE)}" in out and "file x=1 256" in out
        assert f"count {i}" in out, out  # the claim's directory outlived the first TrainJob
    events = [e.message for e in backend.store.list_events("default", "job1")]
    assert events and not any(SECRET_VALUE in m for m in events)


@needs_namespaces
def test_a_missing_configmap_keeps_the_pod_waiting_until_it_is_applied(kt_home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "job.yaml", user_runtime(), trainjob("wait", "rt"))
    kt("apply", "-f", f)

    def step() -> Obj:
        return dict(json.loads(kt("describe", "trainjob", "wait", "-o", "json").stdout)["steps"][0])

    wait_for(lambda: kt("describe", "trainjob", "wait", "-o", "json").stdout.count("not found") > 0)
    s = step()
    assert (s["state"], s["reason"]) == ("Pending", "ContainerCreating")
    assert s["message"] == 'MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found'
    assert "FailedMount" in kt("describe", "trainjob", "wait").stdout
    # The volumes are there now, but the ConfigMap lacks the env's key: the kubelet's CreateContainerConfigError.
    kt("apply", "-f", write(tmp_path / "objs.yaml", cm(**{"app.conf": "x=1"}), secret(password="p", user="u"), pvc()))
    wait_for(lambda: step().get("reason") == "CreateContainerConfigError")
    assert step()["message"] == "couldn't find key greeting in ConfigMap default/cfg"
    assert kt("get", "trainjob", "wait").stdout.split("\n")[1].split()[2] == "Pending"
    kt("apply", "-f", write(tmp_path / "cm.yaml", cm(greeting="hello", **{"app.conf": "x=1"})))
    wait_for(lambda: kt("get", "trainjob", "wait").stdout.split("\n")[1].split()[2] == "Complete")
    assert "env hello u 1" in kt("logs", "wait").stdout


@needs_namespaces
def test_deleting_a_claim_in_use_is_deferred_until_its_trainjob_ends(kt_home: Path, tmp_path: Path) -> None:
    # The job holds the claim until the test says so (the file "go" in it): the checks below need it in use.
    code = ("import pathlib, time\npathlib.Path('/data/f').write_text('x')\nprint('wrote', flush=True)\n"
            "deadline = time.monotonic() + 600\n"
            "while not pathlib.Path('/data/go').exists() and time.monotonic() < deadline:\n    time.sleep(0.1)")
    mounts = [{"name": "data", "mountPath": "/data"}]
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]
    rt = runtime("rt", [rjob("node", [container([sys.executable, "-c", code], volumeMounts=mounts)],
                             ancestor="trainer", volumes=volumes)])
    kt("apply", "-f", write(tmp_path / "pvc.yaml", pvc("d")))
    kt("apply", "-f", write(tmp_path / "job.yaml", rt, trainjob("user", "rt")))
    wait_for(lambda: "wrote" in kt("logs", "user").stdout)
    claim_dir = next((kt_home / "claims" / "default").iterdir())
    assert (claim_dir / "f").read_text() == "x"
    r = kt("delete", "pvc", "d")
    assert "Terminating: in use by trainjob user" in r.stdout and "pvc-protection" in r.stdout
    assert kt("get", "pvc", "d").stdout.split("\n")[1].split()[1] == "Terminating"
    assert "Used By:      trainjob/user" in kt("describe", "pvc", "d").stdout
    # A new TrainJob cannot start on a claim being deleted; re-applying the claim is refused too.
    r = kt("apply", "-f", write(tmp_path / "job2.yaml", rt, trainjob("late", "rt")), check=False)
    assert r.returncode == 1 and 'persistentvolumeclaim "d" is being deleted' in r.stderr
    r = kt("apply", "-f", str(tmp_path / "pvc.yaml"), check=False)
    assert r.returncode == 1 and "is being deleted (waiting for TrainJobs that use it: user)" in r.stderr
    (claim_dir / "go").write_text("")
    wait_for(lambda: kt("get", "trainjob", "user").stdout.split("\n")[1].split()[2] == "Complete")
    assert kt("get", "pvc").stderr == "No resources found in namespace default.\n"
    assert not claim_dir.exists()
