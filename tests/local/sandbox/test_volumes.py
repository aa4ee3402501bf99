"""Pod volumes as host directories (kubetrain.local.sandbox.volumes). Pure: no processes, no namespaces."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kubetrain.local.sandbox.env import ObjectIndex
from kubetrain.local.sandbox.volumes import VolumeError, container_binds, pod_volumes

from ..fixtures import CONFIGMAP, SECRET


class TestVolumes:
    def test_secret_and_configmap_are_materialised_with_modes(self, tmp_path: Path) -> None:
        spec = {
            "volumes": [
                {
                    "name": "ssh",
                    "secret": {
                        "secretName": "creds",
                        "defaultMode": 0o400,
                        "items": [
                            {"key": "token", "path": "id_rsa", "mode": 0o640},
                            {"key": "user", "path": "user"},
                        ],
                    },
                },
                {
                    "name": "hf",
                    "configMap": {
                        "name": "cfg",
                        "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
                    },
                },
                {"name": "scratch", "emptyDir": {}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}},
            ],
            "containers": [{"name": "node", "volumeMounts": [{"name": "init", "mountPath": "/workspace"}]}],
        }
        vols = pod_volumes(
            spec,
            pod_dir=tmp_path / "pod",
            claims_dir=tmp_path / "claims",
            claim_templates={"init"},
            index=ObjectIndex([SECRET, CONFIGMAP]),
            where="pod",
        )
        assert (vols["ssh"] / "id_rsa").read_bytes() == b"s3cr3t"
        assert stat.S_IMODE(os.stat(vols["ssh"] / "id_rsa").st_mode) == 0o640
        assert stat.S_IMODE(os.stat(vols["ssh"] / "user").st_mode) == 0o400
        assert stat.S_IMODE(os.stat(vols["hf"] / "hostfile").st_mode) == 0o444
        assert vols["data"] == tmp_path / "claims" / "shared" and vols["data"].is_dir()
        assert vols["init"] == tmp_path / "claims" / "init"
        binds = container_binds(spec["containers"][0], vols, "c")  # type: ignore[index]
        assert binds[0].dest == "/workspace" and binds[0].src == str(tmp_path / "claims" / "init")

    def test_unsupported_volume_type_names_the_field(self, tmp_path: Path) -> None:
        spec = {"volumes": [{"name": "x", "nfs": {"server": "s"}}]}
        with pytest.raises(VolumeError, match=r"pod\.volumes\[0\]: volume type \['nfs'\] is not supported"):
            pod_volumes(
                spec,
                pod_dir=tmp_path,
                claims_dir=tmp_path,
                claim_templates=set(),
                index=ObjectIndex([]),
                where="pod",
            )

    def test_mount_of_undeclared_volume(self, tmp_path: Path) -> None:
        with pytest.raises(VolumeError, match=r"volumeMounts\[0\]\.name: no volume 'x'"):
            container_binds({"volumeMounts": [{"name": "x", "mountPath": "/a"}]}, {}, "c")


