"""A smoke of benchmarks/python_face.py: it runs end to end and prints its figures. The targets
are not judged here (a timed test on a shared, noisy machine proves nothing); the benchmark run
by hand with --check judges them (docs/python.md, "Speed")."""
import subprocess
import sys

from conftest import REPO, build_dir


def test_the_benchmark_runs():
    baseline = build_dir() / "benchmarks" / "bench_python_baseline"
    assert baseline.exists(), f"{baseline} is not built"
    ran = subprocess.run([sys.executable, str(REPO / "benchmarks" / "python_face.py"), "--rounds", "2",
                          "--calls", "500"], capture_output=True, text=True, timeout=600)
    print(ran.stdout, ran.stderr)
    assert ran.returncode == 0
    lines = [line for line in ran.stdout.splitlines() if line.startswith("BENCH ")]
    assert any(".ratio " in line for line in lines)
    assert any("python.tool_calls.sync " in line for line in lines)
