"""JobSet build: initializers, metadata, patches, overrides, resources, suspend, owner references."""

from __future__ import annotations

import pytest

from kubetrain.api.errors import CompileError
from kubetrain.compiler import compile_trainjob, fixed_keygen, validate_trainjob
from tests.builders import RuntimeBuilder, TrainJobBuilder, compile_objects, container, env, jobset, rjob

INIT_MOUNT = [{"name": "initializer", "mountPath": "/workspace"}]


def three_step_runtime() -> RuntimeBuilder:
    res = {"requests": {"cpu": 1, "memory": "4Gi"}}
    return (
        RuntimeBuilder()
        .ml(numNodes=100, torch={})
        .pod_group(coscheduling={"scheduleTimeoutSeconds": 100})
        .rjob("dataset-initializer", ancestor="dataset-initializer", containers=[
            {"name": "dataset-initializer", "image": "d", "resources": res, "volumeMounts": INIT_MOUNT,
             "env": [{"name": "STORAGE_URI", "value": "hf://runtime"}]}])
        .rjob("model-initializer", ancestor="model-initializer", containers=[
            {"name": "model-initializer", "image": "m", "resources": res, "volumeMounts": INIT_MOUNT}])
        .trainer(resources=res)
    )


def test_plainml_integration_with_coscheduling() -> None:
    tj = (
        TrainJobBuilder(name="alpha")
        .spec(suspend=True, runtimePatches=[{"manager": "test.io/m", "trainingRuntimeSpec": {"template": {
            "metadata": {"labels": {"testingKey": "testingVal"}, "annotations": {"testingKey": "testingVal"}}}}}])
        .initializer(dataset={"storageUri": "hf://trainjob-dataset"}, model={"storageUri": "hf://trainjob-model"})
    )
    objs = compile_objects(tj.build(), three_step_runtime().build())
    js = objs["JobSet/alpha"]
    assert js["spec"]["suspend"] is True
    assert js["metadata"]["labels"] == {"testingKey": "testingVal"}
    assert js["metadata"]["annotations"] == {"testingKey": "testingVal"}
    for name in ("dataset-initializer", "model-initializer", "node"):
        pod_meta = rjob(js, name)["template"]["spec"]["template"]["metadata"]
        assert pod_meta["labels"]["scheduling.x-k8s.io/pod-group"] == "alpha"
    assert env(container(js, "dataset-initializer", "dataset-initializer"))["STORAGE_URI"] == "hf://trainjob-dataset"
    assert env(container(js, "model-initializer", "model-initializer"))["STORAGE_URI"] == "hf://trainjob-model"
    pg = objs["PodGroup/alpha"]
    assert pg["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert pg["spec"] == {"minMember": 102, "minResources": {"cpu": "102", "memory": "408Gi"},
                          "scheduleTimeoutSeconds": 100}


def test_coscheduling_min_resources_sum() -> None:
    rt = RuntimeBuilder().ml(numNodes=2, torch={}).pod_group(coscheduling={"scheduleTimeoutSeconds": 30}).trainer(
        resources={"requests": {"cpu": "500m", "memory": "1Gi"}}).build()
    pg = compile_objects(TrainJobBuilder(name="trainJob").build(), rt)["PodGroup/trainJob"]
    assert pg["spec"] == {"minMember": 2, "minResources": {"cpu": "1", "memory": "2Gi"}, "scheduleTimeoutSeconds": 30}


def test_volcano_podgroup() -> None:
    rt = (RuntimeBuilder().ml(numNodes=2, torch={})
          .pod_group(volcano={"networkTopology": {"mode": "soft"}})
          .meta(annotations={"scheduling.volcano.sh/queue-name": "q1"})
          .trainer(resources={"requests": {"cpu": 2}}).build())
    rt.spec.template.spec.replicated_jobs[0].template.spec.template.spec["priorityClassName"] = "high"
    objs = compile_objects(TrainJobBuilder().build(), rt)
    pg = objs["PodGroup/test-job"]
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert pg["spec"] == {"minMember": 2, "minResources": {"cpu": "4"}, "queue": "q1", "priorityClassName": "high",
                          "networkTopology": {"mode": "soft", "highestTierAllowed": 1}}
    pod_meta = rjob(objs["JobSet/test-job"], "node")["template"]["spec"]["template"]["metadata"]
    assert pod_meta["annotations"] == {"scheduling.k8s.io/group-name": "test-job"}


def test_volcano_empty_queue_annotation_rejected() -> None:
    rt = RuntimeBuilder().pod_group(volcano={}).meta(annotations={"scheduling.volcano.sh/queue-name": ""}).trainer()
    errors = validate_trainjob(TrainJobBuilder().build(), rt.build()).errors
    assert [(e.path, e.message) for e in errors] == [
        ("spec.annotations[scheduling.volcano.sh/queue-name]", "Volcano queue name must not be empty")]


def test_resources_merge_per_key() -> None:
    rt = RuntimeBuilder().ml(torch={}).trainer(resources={"requests": {"cpu": 1, "memory": "4Gi"}}).build()
    tj = TrainJobBuilder().resources(limits={"nvidia.com/gpu": 4}).build()
    assert container(jobset(tj, rt), "node")["resources"] == {
        "requests": {"cpu": 1, "memory": "4Gi"}, "limits": {"nvidia.com/gpu": 4}}


def test_runtime_patches_from_two_managers() -> None:
    rt = (
        RuntimeBuilder().ml(torch={})
        .rjob("dataset-initializer", ancestor="dataset-initializer",
              containers=[{"name": "dataset-initializer", "image": "d", "volumeMounts": INIT_MOUNT}],
              init_containers=[{"name": "init", "image": "i", "env": [
                  {"name": "INIT_ENV", "value": "runtime"}, {"name": "DATASET_PATH", "value": "runtime"}]}])
        .rjob("node", ancestor="trainer", containers=[
            {"name": "node", "image": "runtime-img"}, {"name": "override-container", "image": "o"}])
        .build()
    )
    patch1 = {"manager": "acme.io/manager-1", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "dataset-initializer", "template": {"spec": {"template": {"spec": {
            "initContainers": [{"name": "init", "env": [{"name": "INIT_ENV", "value": "override_init"},
                                                          {"name": "NEW_VALUE", "value": "from_overrides"}]}],
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "a", "operator": "Exists"}],
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "volumes": [{"name": "extra", "emptyDir": {}}],
        }}}}}]}}}}
    patch2 = {"manager": "acme.io/manager-2", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"metadata": {"labels": {"job": "label"}}, "spec": {"template": {
            "metadata": {"annotations": {"pod": "anno"}},
            "spec": {"serviceAccountName": "override-sa", "terminationGracePeriodSeconds": 300,
                     "imagePullSecrets": [{"name": "pull"}],
                     "containers": [{"name": "override-container", "env": [{"name": "E", "value": "v"}]}]}}}}}]}}}}
    tj = TrainJobBuilder().trainer(image="job-img").spec(runtimePatches=[patch1, patch2]).build()
    assert validate_trainjob(tj, rt).ok
    js = jobset(tj, rt)
    init = container(js, "dataset-initializer", "init", init=True)
    assert [(e["name"], e["value"]) for e in init["env"]] == [
        ("INIT_ENV", "override_init"), ("DATASET_PATH", "runtime"), ("NEW_VALUE", "from_overrides")]
    pod = rjob(js, "dataset-initializer")["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"disk": "ssd"} and pod["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    node_rjob = rjob(js, "node")
    assert node_rjob["template"]["metadata"]["labels"]["job"] == "label"
    node_pod = node_rjob["template"]["spec"]["template"]
    assert node_pod["metadata"]["annotations"] == {"pod": "anno"}
    assert node_pod["spec"]["serviceAccountName"] == "override-sa"
    assert node_pod["spec"]["terminationGracePeriodSeconds"] == 300
    assert container(js, "node")["image"] == "job-img"
    assert env(container(js, "node", "override-container")) == {"E": "v"}
    assert [r["name"] for r in js["spec"]["replicatedJobs"]] == ["dataset-initializer", "node"]


def test_runtime_patch_validation() -> None:
    rt = RuntimeBuilder().ml(torch={}).trainer().build()
    bad = [
        {"manager": "kueue.k8s.io/", "trainingRuntimeSpec": {}},
        {"manager": "acme.io/m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "ghost"},
            {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [
                {"name": "node", "env": [{"name": "X", "value": "1"}]}, {"name": "nope"}]}}}}},
        ]}}}},
    ]
    tj = TrainJobBuilder().spec(runtimePatches=bad).build()
    errors = {e.path: e.message for e in validate_trainjob(tj, rt).errors}
    assert "domain-prefixed path" in errors["spec.runtimePatches[0].manager"]
    base = "spec.runtimePatches[1].trainingRuntimeSpec.template.spec.replicatedJobs"
    assert errors[f"{base}[0]"] == "must not have replicated job that doesn't exist in the runtime job template"
    assert errors[f"{base}[1].template.spec.template.spec.containers[0].env"] == (
        "must not have envs for the dataset-initializer, model-initializer, node containers")
    assert errors[f"{base}[1].template.spec.template.spec.containers[1]"] == (
        "must not have container that doesn't exist in the runtime job node")
    ok = [{"manager": "kueue.k8s.io/manager"}]
    assert validate_trainjob(TrainJobBuilder().spec(runtimePatches=ok).build(), rt).ok


def test_pod_template_overrides_v21() -> None:
    rt = RuntimeBuilder().ml(torch={}).trainer().rjob("other", containers=[{"name": "o", "image": "o"}]).build()
    tj = TrainJobBuilder().spec(labels={"jobset": "label"}, podTemplateOverrides=[
        {"targetJobs": [{"name": "node"}], "metadata": {"labels": {"a": "1"}},
         "spec": {"serviceAccountName": "sa1", "nodeSelector": {"x": "y"}}},
        {"targetJobs": [{"name": "node"}, {"name": "other"}], "spec": {"serviceAccountName": "sa2"}},
    ]).build()
    js = jobset(tj, rt)
    assert js["metadata"]["labels"] == {"jobset": "label"}
    pod = rjob(js, "node")["template"]["spec"]["template"]
    assert pod["metadata"]["labels"] == {"a": "1"}
    assert pod["spec"]["serviceAccountName"] == "sa2" and pod["spec"]["nodeSelector"] == {"x": "y"}
    assert rjob(js, "other")["template"]["spec"]["template"]["spec"]["serviceAccountName"] == "sa2"
    bad = TrainJobBuilder().spec(podTemplateOverrides=[{"targetJobs": [{"name": "nope"}]}]).build()
    assert [e.path for e in validate_trainjob(bad, rt).errors] == ["spec.podTemplateOverrides[0].targetJobs[0].name"]


def test_initializer_checks() -> None:
    rt = RuntimeBuilder().ml(torch={}).trainer().rjob(
        "model-initializer", ancestor="model-initializer", containers=[{"name": "model-initializer", "image": "m"}]
    ).build()
    tj = TrainJobBuilder().initializer(dataset={"storageUri": "hf://d"}, model={"storageUri": "hf://m"}).build()
    errors = {e.path: e.message for e in validate_trainjob(tj, rt).errors}
    assert errors["spec.initializer.dataset"].startswith(
        "must have dataset-initializer job when trainJob is configured with input datasetConfig")
    assert errors["spec.initializer.model"] == (
        "must have volumeMount with name - initializer in container model-initializer of the model-initializer job")


def test_initializer_secret_and_env() -> None:
    tj = TrainJobBuilder().initializer(dataset={"storageUri": "s3://b/p", "env": [{"name": "REGION", "value": "eu"}],
                                                "secretRef": {"name": "creds"}}).build()
    js = jobset(tj, three_step_runtime().build())
    c = container(js, "dataset-initializer", "dataset-initializer")
    assert env(c) == {"STORAGE_URI": "s3://b/p", "REGION": "eu"}
    assert c["envFrom"] == [{"secretRef": {"name": "creds"}}]


def test_trainer_fields_without_trainer_step() -> None:
    rt = RuntimeBuilder().rjob("worker", containers=[{"name": "w", "image": "w"}]).build()
    errors = validate_trainjob(TrainJobBuilder().trainer(numNodes=2).build(), rt).errors
    assert errors[0].path == "spec.trainer"
    assert "trainer.kubeflow.org/trainjob-ancestor-step: trainer" in errors[0].message


def test_owner_references_and_snapshot() -> None:
    objs = compile_objects(TrainJobBuilder(name="own").build(), three_step_runtime().build())
    assert list(objs) == ["ConfigMap/own-runtime-snapshot", "PodGroup/own", "JobSet/own"]
    for o in objs.values():
        assert o["metadata"]["ownerReferences"] == [{
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "own", "uid": "uid-own",
            "controller": True, "blockOwnerDeletion": True}]
    import yaml

    snap = yaml.safe_load(objs["ConfigMap/own-runtime-snapshot"]["data"]["runtime"])
    assert snap["kind"] == "ClusterTrainingRuntime" and snap["metadata"]["name"] == "test-runtime"


def test_the_compiler_refuses_more_pods_than_a_job_runs_before_naming_them() -> None:
    """The compiler's input contract is a validated pair; called without validation (the Python API), a node
    count of 10^12 is a CompileError naming the field, not 10^12 pod names."""
    runtime = RuntimeBuilder("rt").ml(numNodes=1, torch={}).trainer().build()
    huge = TrainJobBuilder(runtime="rt").trainer(numNodes=10**12).build()
    with pytest.raises(CompileError) as raised:
        compile_trainjob(huge, runtime, keygen=fixed_keygen())
    assert raised.value.finding.path == "spec.trainer.numNodes"
    assert raised.value.finding.message == (
        'replicated job "node" would run 1000000000000 pods (1 Job(s) of 1000000000000); Kubernetes runs an Indexed '
        "Job of at most 100000 pods")
    at_the_limit = TrainJobBuilder(runtime="rt").trainer(numNodes=100_000).build()
    jobset = compile_objects(at_the_limit, runtime)["JobSet/test-job"]
    assert rjob(jobset, "node")["template"]["spec"]["parallelism"] == 100_000


def test_kueue_labels_of_the_trainjob_go_on_the_jobset_only() -> None:
    """Kueue's JobSet integration queues the JobSet by these labels; no other TrainJob label is propagated, and
    the pods do not get them (Kueue's pod integration would otherwise queue every pod on its own)."""
    tj = TrainJobBuilder(name="q")
    tj.obj["metadata"]["labels"] = {
        "kueue.x-k8s.io/queue-name": "team-a",
        "kueue.x-k8s.io/priority-class": "high",
        "team": "a",
    }
    rt = RuntimeBuilder().ml(numNodes=2, torch={}).meta(labels={"from-runtime": "x"}).trainer().build()
    js = jobset(tj.build(), rt)
    assert js["metadata"]["labels"] == {
        "from-runtime": "x",
        "kueue.x-k8s.io/queue-name": "team-a",
        "kueue.x-k8s.io/priority-class": "high",
    }
    pod_labels = (rjob(js, "node")["template"]["spec"]["template"].get("metadata") or {}).get("labels") or {}
    assert not any(k.startswith("kueue.x-k8s.io/") for k in pod_labels)


def test_a_runtime_patch_still_overrides_the_queue_a_trainjob_label_names() -> None:
    tj = TrainJobBuilder(name="q").spec(runtimePatches=[{"manager": "acme.io/admin", "trainingRuntimeSpec": {
        "template": {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "patched"}}}}}])
    tj.obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    rt = RuntimeBuilder().ml(numNodes=1, torch={}).trainer().build()
    assert jobset(tj.build(), rt)["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "patched"}


def test_kueue_admission_patch_places_the_pods_it_names() -> None:
    """What Kueue's TrainJob integration writes on admission: per replicated job, pod labels/annotations,
    nodeSelector, the full toleration list and scheduling gates, under its own manager."""
    placement = {"name": "node", "template": {"spec": {"template": {
        "metadata": {"labels": {"kueue.x-k8s.io/podset": "node"}, "annotations": {"kueue.x-k8s.io/workload": "w"}},
        "spec": {"nodeSelector": {"pool": "a100"},
                 "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}]}}}}}
    tj = TrainJobBuilder(name="q").spec(runtimePatches=[{"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {
        "template": {"spec": {"replicatedJobs": [placement]}}}}])
    rt = RuntimeBuilder().ml(numNodes=2, torch={}).trainer().build()
    pod = rjob(jobset(tj.build(), rt), "node")["template"]["spec"]["template"]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "node"
    assert pod["metadata"]["annotations"] == {"kueue.x-k8s.io/workload": "w"}
    assert pod["spec"]["nodeSelector"] == {"pool": "a100"}
    assert pod["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]


def test_null_fields_in_the_runtime_are_absent_ones() -> None:
    """``env: null`` is what the API server stores as no env; the plugins that add env, mounts and volumes must
    treat it so (found by ``make fuzz``: a TypeError in the dataset initializer's STORAGE_URI)."""
    rt = (
        RuntimeBuilder()
        .ml(numNodes=1, torch={})
        .rjob("dataset-initializer", ancestor="dataset-initializer", containers=[
            {"name": "dataset-initializer", "image": "d", "env": None, "volumeMounts": None}])
        .trainer()
        .build()
    )
    tj = TrainJobBuilder(name="nulls").initializer(dataset={"storageUri": "hf://org/data"}).build()
    js = jobset(tj, rt)
    init = container(js, "dataset-initializer", "dataset-initializer")
    assert env(init)["STORAGE_URI"] == "hf://org/data"

    def nulls(v: object) -> int:
        if isinstance(v, dict):
            return sum(x is None or nulls(x) for x in v.values())
        return sum(nulls(x) for x in v) if isinstance(v, list) else 0

    assert nulls(js) == 0
