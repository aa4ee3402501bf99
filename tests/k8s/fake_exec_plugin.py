"""A kubeconfig exec credential plugin for tests (run as ``python fake_exec_plugin.py``).

Its behaviour comes from ``$FAKE_EXEC_DIR/plan.json`` (read on every run, so a test can change it between runs);
every run appends the ``KUBERNETES_EXEC_INFO`` it received, plus selected environment, to ``calls.jsonl``.

plan keys: ``api_version`` (answer with this apiVersion), ``token`` (``{n}`` is replaced by the run number),
``ttl`` (seconds until expirationTimestamp; absent = no expiry), ``cert``/``key`` (PEM text), ``exit`` (exit code),
``stdout`` (print this instead of a credential), ``stderr`` (print this to stderr).
"""

import datetime as dt
import json
import os
import sys
from pathlib import Path

state = Path(os.environ["FAKE_EXEC_DIR"])
plan = json.loads((state / "plan.json").read_text())
info = json.loads(os.environ.get("KUBERNETES_EXEC_INFO", "null"))
calls = state / "calls.jsonl"
n = len(calls.read_text().splitlines()) + 1 if calls.exists() else 1
with calls.open("a") as fh:
    record = {"info": info, "extra_env": os.environ.get("FAKE_EXTRA"), "stdin_tty": sys.stdin.isatty()}
    fh.write(json.dumps(record) + "\n")
if plan.get("stderr"):
    print(plan["stderr"], file=sys.stderr)
if plan.get("exit"):
    sys.exit(plan["exit"])
if "stdout" in plan:
    print(plan["stdout"])
    sys.exit(0)
status = {}
if plan.get("token"):
    status["token"] = plan["token"].replace("{n}", str(n))
if plan.get("cert"):
    status["clientCertificateData"] = plan["cert"]
    status["clientKeyData"] = plan["key"]
if "ttl" in plan:
    expiry = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=plan["ttl"])
    status["expirationTimestamp"] = expiry.strftime("%Y-%m-%dT%H:%M:%SZ")
api_version = plan.get("api_version") or (info or {}).get("apiVersion")
print(json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status}))
