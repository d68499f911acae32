"""The operators' kit as code (ops/): the alert rules pass promtool's own checks and unit
tests, every PromQL expression of the rules and the Grafana dashboard names a metric the
server exports, and a real Prometheus scraping a running server sees its tables.

Needs Debian's ``prometheus`` package (``promtool`` and ``prometheus``): make test installs it,
as the README's set-up line does."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from copas.v1 import copas_pb2

from tests.helpers.calls import new_table
from tests.helpers.servers import ROOT, free_port, fresh_database, serving

OPS = ROOT / "ops"
PROMETHEUS_ONLY = {"up"}  # series Prometheus makes itself
WAITING = 'copas_tables{job="copas", phase="waiting_for_players"}'


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} is missing: apt-get install -y prometheus (the README's set-up line)"
    return found


def test_the_alert_rules_pass_promtool_and_their_unit_tests() -> None:
    promtool = _tool("promtool")
    for args in (["check", "rules", "rules.yml"], ["check", "config", "prometheus.yml"],
                 ["test", "rules", "rules_test.yml"]):
        done = subprocess.run([promtool, *args], cwd=OPS / "prometheus", capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
    # Every alert has a unit test, and a runbook line in docs/OPERATING.md.
    alerts = [r["alert"] for g in yaml.safe_load((OPS / "prometheus" / "rules.yml").read_text())
              ["groups"] for r in g["rules"] if "alert" in r]
    tested = (OPS / "prometheus" / "rules_test.yml").read_text()
    runbook = (ROOT / "docs" / "OPERATING.md").read_text()
    for alert in alerts:
        assert f"alertname: {alert}\n" in tested, alert
        assert f"`{alert}`" in runbook, alert


def _expressions() -> list[str]:
    rules = yaml.safe_load((OPS / "prometheus" / "rules.yml").read_text())
    found = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    dashboard = json.loads((OPS / "grafana" / "copas.json").read_text())
    for panel in dashboard["panels"]:
        found += [t["expr"] for t in panel.get("targets", [])]
    return found


def _metric_names(expression: str) -> set[str]:
    """The series an expression selects: names followed by a selector, a range or nothing
    a function would take (labels inside ``{}`` and ``by (...)`` are left out)."""
    text = re.sub(r"\{[^}]*\}", "{}", expression)  # label matchers
    text = re.sub(r"\b(by|without)\s*\([^)]*\)", "", text)  # grouping labels
    text = re.sub(r"\[[^\]]*\]", "[]", text)  # ranges
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text))
    functions = {"histogram_quantile", "sum", "rate", "increase", "changes", "max", "min",
                 "avg", "count", "le", "s", "__rate_interval"}
    return {w for w in words if w not in functions and not w.isdigit()}


def _exported(text: str) -> set[str]:
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


async def _scrape(port: int) -> str:
    url = f"http://127.0.0.1:{port}/metrics"
    return await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())


async def test_every_expression_names_a_metric_the_server_exports(postgres: Any) -> None:
    """One process and a cluster node: together they export every series the rules and the
    dashboard read (a renamed metric breaks this test, not the on-call's night)."""
    exported: set[str] = set()
    port = free_port()
    async with serving(metrics_port=port, metrics_host="127.0.0.1", web_port=free_port(),
                       web_host="127.0.0.1"):  # the page's connections too
        exported |= _exported(await _scrape(port))
    port = free_port()
    async with serving(metrics_port=port, metrics_host="127.0.0.1",
                       database=fresh_database(postgres.dsn), node_id="ops"):
        exported |= _exported(await _scrape(port))
    expressions = _expressions()
    assert len(expressions) > 25
    for expression in expressions:
        names = _metric_names(expression)
        assert names, expression
        missing = names - exported - PROMETHEUS_ONLY
        assert not missing, (expression, missing)


def _query(prometheus: int, expression: str) -> list[dict[str, Any]]:
    url = (f"http://127.0.0.1:{prometheus}/api/v1/query?"
           + urllib.parse.urlencode({"query": expression}))
    with urllib.request.urlopen(url, timeout=5) as answer:
        body = json.loads(answer.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


async def test_a_real_prometheus_scrapes_the_server_and_sees_its_tables(
        tmp_path: Path) -> None:
    """Prometheus with the shipped rules scrapes a running server every second; a query for
    the tables waiting for players returns the three this test made, and the rules load."""
    metrics_port, prometheus_port = free_port(), free_port()
    config = yaml.safe_load((OPS / "prometheus" / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(OPS / "prometheus" / "rules.yml")]
    config["scrape_configs"][0]["static_configs"] = [
        {"targets": [f"127.0.0.1:{metrics_port}"]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    async with serving(metrics_port=metrics_port, metrics_host="127.0.0.1") as (_, stub):
        for name in ("a", "b", "c"):
            await stub.CreateTable(copas_pb2.CreateTableRequest(display_name=name))
        await new_table(stub, bots=4, seed=None)  # a game under way (or over) besides
        prometheus = subprocess.Popen(
            [_tool("prometheus"), f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{prometheus_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    result = await asyncio.to_thread(_query, prometheus_port, WAITING)
                except OSError:  # not listening yet
                    result = []
                if result:
                    break
                assert prometheus.poll() is None, prometheus.stderr.read() \
                    if prometheus.stderr else ""
                assert time.monotonic() < deadline, "Prometheus never saw the server"
                await asyncio.sleep(0.2)
            assert float(result[0]["value"][1]) == 3
            up = await asyncio.to_thread(_query, prometheus_port, 'up{job="copas"}')
            assert [float(r["value"][1]) for r in up] == [1]
            url = f"http://127.0.0.1:{prometheus_port}/api/v1/rules"
            rules = await asyncio.to_thread(
                lambda: json.loads(urllib.request.urlopen(url, timeout=5).read()))
            loaded = {r["name"] for g in rules["data"]["groups"] for r in g["rules"]}
            assert {"CopasNodeDown", "CopasMoveToViewSlow", "CopasTablesStuck"} <= loaded
        finally:
            prometheus.terminate()
            prometheus.wait(15)
