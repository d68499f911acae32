"""Hearts's CPU per card over the batched Play stream before and after the game seam, in one
run, alternating (issue 41's acceptance: within 1.05x).

"Before" is a commit of this repository's history (``--before``, by default the last commit
before the seam), extracted with ``git archive`` into a temporary directory (as
tests/helpers/releases.py runs an earlier release), its protos generated there with this
.venv's tools and the compiled engine and playouts copied from this checkout (they are built
at install, never committed, and the seam changed neither's source: checked);
"after" is this checkout. Each round runs bench/cpu_per_move.py's Copas round (the server with
its defaults, SQLite in a temporary directory, under ``copas loadtest`` over the batched Play
stream) once on each, in alternating order, so drift on a shared machine falls on both alike.

Prints per round the two figures, then ``before_cpu_ms_per_card=``, ``after_cpu_ms_per_card=``
(medians) and ``after_vs_before_ratio=``. Then Bisca's figure on this checkout, as many rounds:
bench/bisca_load.py (two people a table, each on a batched Play stream; ``copas loadtest``
plays Hearts only) against the same server, ``bisca_cpu_ms_per_card=`` (the median).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_per_move import ENV, copas_round, cpu_seconds, free_port, last_json, server_flags

ROOT = Path(__file__).resolve().parent.parent
SEAM_PARENT = "58cd36d"  # the last commit before server/games (issue 41)
COMPILED = ("engine/game.py", "ai/playout.py")  # what mypyc builds at install (setup.py)


def extract(commit: str, into: Path) -> Path:
    """``commit`` of this repository, ready to run, in ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True,
                             check=True, timeout=60)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True, timeout=60)
    for source in COMPILED:
        changed = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", commit, "--",
                                  source], timeout=60)
        if changed.returncode != 0 or subprocess.run(
                ["git", "-C", str(ROOT), "diff", "--quiet", "--", source]).returncode != 0:
            raise SystemExit(f"{source} differs between {commit} and this checkout: its "
                             "compiled module cannot be shared; build that commit instead")
        package, name = source.split("/")
        for built in (ROOT / package).glob(f"{name[:-3]}*.so"):
            shutil.copy2(built, into / package / built.name)
    protos = sorted(str(p.relative_to(into / "protos"))
                    for p in (into / "protos" / "copas").rglob("*.proto"))
    bin_dir = Path(sys.executable).parent
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.",
         "--grpc_python_out=.", f"--plugin=protoc-gen-connectrpc={bin_dir}/protoc-gen-connectrpc",
         "--connectrpc_out=.", "--connectrpc_opt=protobuf=google", *protos],
        cwd=into / "protos", check=True, capture_output=True, timeout=120)
    return into


def bisca_round(args: argparse.Namespace) -> dict[str, float]:
    """This checkout's server under bench/bisca_load.py: its CPU per card played."""
    port = free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        server = subprocess.Popen(
            [sys.executable, "-m", "server.main", "--listen", f"127.0.0.1:{port}",
             "--metrics-port", "0", "--data-dir", data_dir, *server_flags(ROOT),
             *shlex.split(args.server_args)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)
        assert server.stdout is not None and "listening" in server.stdout.readline()
        try:
            before = cpu_seconds(server.pid)
            report = last_json([sys.executable, str(ROOT / "bench" / "bisca_load.py"),
                                "--server", f"127.0.0.1:{port}", "--tables",
                                str(args.tables), "--duration", str(args.duration)])
            used = cpu_seconds(server.pid) - before
        finally:
            server.terminate()
            server.wait(30)
    report["server_cpu_ms_per_move"] = round(used * 1000 / max(1, report["moves"]), 4)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=SEAM_PARENT, help="the commit to compare against")
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server-args", default="")
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="copas-before-") as directory:
        roots = {"before": extract(args.before, Path(directory)), "after": ROOT}
        for number in range(1, args.rounds + 1):
            order = ("before", "after") if number % 2 else ("after", "before")
            for which in order:
                run = argparse.Namespace(root=str(roots[which]), tables=args.tables,
                                         duration=args.duration, processes=args.processes,
                                         server_args=args.server_args)
                report = copas_round(run, "play")
                figures[which].append(report["server_cpu_ms_per_move"])
                print(f"round {number} {which}: {report['server_cpu_ms_per_move']:.3f} ms CPU "
                      f"per card, {report['moves_per_s']} cards/s, errors "
                      f"{report['errors'] or 0}", flush=True)
    before, after = (statistics.median(figures[w]) for w in ("before", "after"))
    print(f"before_cpu_ms_per_card={before:.3f}")
    print(f"after_cpu_ms_per_card={after:.3f}")
    print(f"after_vs_before_ratio={after / before:.3f}")
    bisca = []
    for number in range(1, args.rounds + 1):
        report = bisca_round(args)
        bisca.append(report["server_cpu_ms_per_move"])
        print(f"round {number} bisca: {report['server_cpu_ms_per_move']:.3f} ms CPU per card, "
              f"{report['moves']} cards, {report['games']} games, errors {report['errors']}",
              flush=True)
    print(f"bisca_cpu_ms_per_card={statistics.median(bisca):.3f}")


if __name__ == "__main__":
    main()
