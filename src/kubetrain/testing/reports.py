"""A trial that only reports its objective: what benchmarks and e2e tests run when the training itself is not the
point. ``python3 -c REPORT_ONCE X`` posts ``loss = (X - 0.3) ** 2`` once, from the first pod of the TrainJob, to the
status endpoint as the Kubeflow SDK's ``update_trainjob_status`` does, with the standard library only (the bed's
training image has no SDK)."""

from __future__ import annotations

from typing import Final

REPORT_ONCE: Final = """
import datetime, json, os, ssl, sys, urllib.request
if os.environ.get("JOB_COMPLETION_INDEX", "0") == "0":
    x = float(sys.argv[1])
    body = {"trainerStatus": {"metrics": [{"name": "loss", "value": str((x - 0.3) ** 2)}],
            "lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}}
    req = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], data=json.dumps(body).encode(),
                                 method="POST")
    req.add_header("Authorization", "Bearer " + open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip())
    req.add_header("Content-Type", "application/json")
    ctx = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
    urllib.request.urlopen(req, context=ctx, timeout=30).close()
    print("reported", x, flush=True)
"""
