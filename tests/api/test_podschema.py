"""The shipped pod template structure stays in sync with the JobSet CRD it was taken from."""

from __future__ import annotations

import yaml

from kubetrain.api.podschema import pod_template_schema
from tests.conftest import shared_path


def _strip(x: object) -> object:
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k != "description"}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def test_schema_matches_jobset_crd() -> None:
    crd = yaml.safe_load(shared_path("reference", "upstream", "jobset", "jobset.x-k8s.io_jobsets.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    pod = spec["properties"]["replicatedJobs"]["items"]["properties"]["template"]["properties"]["spec"]
    assert _strip(pod["properties"]["template"]) == pod_template_schema()
