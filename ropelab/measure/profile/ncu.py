"""Running Nsight Compute (GPU only): the command lines, one ``ncu`` run per group of cases,
and :func:`record_profile`, which records them all."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import cases as _cases
from .parse import (KIND, METRICS, PROFILE_VERSION, SECTIONS, PERMISSION_ERRORS, UNKNOWN_NAME,
                    ProfileError, match, parse_raw_csv, summarize)
from .widths import census_widths


def find_ncu(explicit: str | None = None) -> str | None:
    """``ncu`` on PATH, or in the usual CUDA / Nsight Compute install folders."""
    if explicit:
        return explicit if Path(explicit).is_file() else shutil.which(explicit)
    found = shutil.which("ncu")
    if found:
        return found
    candidates = sorted(Path("/usr/local").glob("cuda*/bin/ncu"), reverse=True)
    candidates += sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"), reverse=True)
    candidates += sorted(Path("/usr/local").glob("NVIDIA-Nsight-Compute*/ncu"), reverse=True)
    return str(candidates[0]) if candidates else None


def ncu_version(ncu: str) -> str | None:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Version\s+(\S+)", out)
    return m.group(1) if m else (out.strip().splitlines() or [None])[-1]


def available_metrics(ncu: str) -> set[str] | None:
    """Base metric names the local GPU supports (``ncu --query-metrics``), or None if unknown."""
    try:
        out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True,
                             timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = {m.group(1) for m in re.finditer(r"^([a-z0-9_]+__[a-z0-9_]+)\b", out, re.M)}
    return names or None


def usable_metrics(available: set[str] | None) -> tuple[list[str], list[str]]:
    """(metrics to request, metrics dropped because this GPU/ncu does not know them)."""
    if available is None:
        return list(METRICS), []
    keep = [m for m in METRICS if m.split(".", 1)[0] in available]
    return keep, [m for m in METRICS if m not in keep]


def kernel_filter(group_cases: list[dict]) -> str:
    names = sorted({e.rstrip("*") for c in group_cases for e in c["expect"]})
    return "regex:" + "|".join(re.escape(n) for n in names)


def ncu_command(ncu: str, report: Path, group_cases: list[dict], plan_path: Path,
                manifest_path: Path, *, sections=SECTIONS, metrics=METRICS) -> list[str]:
    cmd = [ncu, "--clock-control", "none", "--replay-mode", "kernel", "--cache-control", "all",
           "--kernel-name-base", "mangled", "--kernel-name", kernel_filter(group_cases),
           "--launch-count", str(len(group_cases)), "--export", str(report), "--force-overwrite"]
    for s in sections:
        cmd += ["--section", s]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    return cmd + [sys.executable, "-m", "ropelab.measure.cases", str(plan_path), str(manifest_path)]


def import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base",
            "--print-kernel-base", "mangled"]


def _child_env() -> dict:
    env = dict(os.environ, ROPELAB_TARGET="gpu", ROPELAB_QUIET="1", PYTHONUNBUFFERED="1")
    root = str(Path(__file__).resolve().parents[3])  # the child imports this checkout's ropelab
    env["PYTHONPATH"] = os.pathsep.join([p for p in (root, env.get("PYTHONPATH")) if p])
    return env


class Terminated(Exception):
    """SIGTERM arrived (an outer time limit): ncu and its child are gone, earlier groups kept."""


def _on_sigterm(signum, frame):
    raise Terminated()


def _run(cmd, timeout_s, env=None):
    """(exit status or None on timeout, stdout + stderr).  ncu runs in its own process group, and
    the whole group goes on a timeout or any interruption: the Python process ncu launched holds
    the GPU and must not outlive the run."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def profile_group(ncu: str, group_cases: list[dict], reports: Path, *, metrics, timeout_s: float,
                  log=print) -> tuple[list[tuple[dict, dict]], str]:
    """Profile one group; returns (matched (case, result) pairs, the configuration that worked)."""
    group = group_cases[0]["group"]
    reports.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        plan_path, manifest_path = Path(tmp) / "plan.json", Path(tmp) / "manifest.jsonl"
        plan_path.write_text(json.dumps(group_cases))
        report = reports / f"{group}.ncu-rep"
        attempts = [("sections+metrics", SECTIONS, metrics), ("sections", SECTIONS, ()),
                    ("metrics", (), metrics)]
        for label, sections, mets in attempts:
            if not sections and not mets:
                continue
            for stale in (report, manifest_path):
                stale.unlink(missing_ok=True)
            cmd = ncu_command(ncu, report, group_cases, plan_path, manifest_path,
                              sections=sections, metrics=mets)
            log(f"[{group}] {label}: {len(group_cases)} launches under ncu")
            rc, out = _run(cmd, timeout_s, env=_child_env())
            (reports / f"{group}.log").write_text(" ".join(cmd) + "\n\n" + out)
            if any(p in out for p in PERMISSION_ERRORS):
                raise ProfileError("ncu may not read the GPU's performance counters here "
                                   "(ERR_NVGPUCTRPERM): run as root or with "
                                   "NVreg_RestrictProfilingToAdminUsers=0")
            if rc is None:
                raise ProfileError(f"ncu did not finish the {group} group in {timeout_s:.0f} s")
            if report.exists() and manifest_path.exists():
                break
            errors = "\n".join(line for line in out.splitlines() if "==ERROR==" in line)
            if not UNKNOWN_NAME.search(errors):  # only a name this ncu lacks is worth a retry
                raise ProfileError(f"ncu failed on the {group} group (exit {rc}): "
                                   f"{(errors or out)[-1500:]}")
        else:
            raise ProfileError(f"ncu knows neither the sections nor the metrics requested: {errors[-1500:]}")
        entries = [json.loads(line) for line in manifest_path.read_text().splitlines()]
        for e in entries:
            if not e["ok"]:
                log(f"[{group}] launch failed, not profiled: {e['id']}: {e['error']}")
        launched_ids = [e["id"] for e in entries if e["ok"]]
        rc, text = _run(import_command(ncu, report), 600)
        if rc != 0:
            raise ProfileError(f"ncu --import failed: {text[-1000:]}")
        (reports / f"{group}.csv").write_text(text)
    by_id = {c["id"]: c for c in group_cases}
    return match([by_id[i] for i in launched_ids], parse_raw_csv(text)), label


METHOD = (
    "Nsight Compute ({ncu}) with --clock-control none (the GPU's own clocks), kernel replay, "
    "--cache-control all (caches flushed before every replay pass: cold L2); one ncu run per group "
    "launches `python -m ropelab.measure.cases`, which launches each case exactly once (plain "
    "variants and the fused kernel through ropelab.rope / ropelab.fused_qknorm_rope on device "
    "arrays, controls through ropelab.measure.controls); --kernel-name filters to the cases' "
    "kernels and --launch-count to their number; result i is matched to launched case i and its "
    "kernel name checked. Counters from the sections {sections} and the metrics listed in meta; "
    "exported with --page raw --print-units base. dram_gbps = (DRAM bytes read + written) / "
    "gpu__time_duration (a profiled, replayed kernel: use the bench for times); ld_bits/st_bits "
    "from the PTX instruction census of the same kernels (compiled, not counted at run time).")


def record_profile(groups=_cases.GROUPS, *, only: str | None = None, ncu: str | None = None,
                   reports: Path | str | None = None, out: Path | str | None = None,
                   timeout_s: float = 240.0, log=print, command: str | None = None) -> Path:
    """Profile the cases of ``groups`` (optionally only ids matching regex ``only``); record them."""
    from .. import records

    meta = records.metadata()  # refuses on the simulator
    exe = find_ncu(ncu)
    if exe is None:
        raise ProfileError("ncu (Nsight Compute CLI) not found on PATH or under /usr/local/cuda*/bin, "
                           "/opt/nvidia/nsight-compute; pass --ncu PATH")
    all_cases = _cases.plan(groups)
    if only:
        all_cases = [c for c in all_cases if re.search(only, c["id"])]
    if not all_cases:
        raise ProfileError("no case matches")
    metrics, dropped = usable_metrics(available_metrics(exe))
    # The census compiles (a few seconds per kernel when its cache is stale): in the background,
    # while ncu profiles the first group.
    pool = ThreadPoolExecutor(1)
    census_job = pool.submit(census_widths)
    pool.shutdown(wait=False)
    reports = Path(reports) if reports else records.DATA_DIR / KIND / "reports"
    version = ncu_version(exe)
    meta.update(profile_version=PROFILE_VERSION, ncu=version, ncu_path=exe,
                command=command or f"python -m ropelab profile --groups {','.join(groups)}"
                + (f" --only {only}" if only else ""),
                sections=list(SECTIONS), metrics=metrics, metrics_dropped=dropped,
                clock_control="none", replay_mode="kernel", cache_control="all",
                groups={}, census_keys=None)
    method = METHOD.format(ncu=version, sections=", ".join(SECTIONS))
    directory = Path(out) / KIND if out else None
    rows, path = [], None
    try:  # an outer `timeout` sends SIGTERM: stop cleanly, keeping the groups already recorded
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        previous = None
    try:
        for group in _cases.GROUPS:
            group_cases = [c for c in all_cases if c["group"] == group]
            if not group_cases:
                continue
            t0 = time.perf_counter()
            status = {"cases": len(group_cases)}
            try:
                pairs, config = profile_group(exe, group_cases, reports, metrics=metrics,
                                              timeout_s=timeout_s, log=log)
                if meta["census_keys"] is None:
                    try:
                        widths, meta["census_keys"] = census_job.result()
                    except Exception as exc:  # widths stay unknown; the counters are still good
                        widths, meta["census_keys"] = {}, {"error": str(exc)[:300]}
                rows += [summarize(c, r, widths) for c, r in pairs]
                status.update(profiled=len(pairs), config=config)
            except ProfileError as exc:
                log(f"[{group}] {exc}")
                status.update(profiled=0, error=str(exc)[:1500])
            status["seconds"] = round(time.perf_counter() - t0, 1)
            meta["groups"][group] = status
            if rows:  # saved after every group, into this run's one file
                path = records.save(KIND, rows, method=method, meta=meta, directory=directory,
                                  replace=path)
            if "ERR_NVGPUCTRPERM" in status.get("error", ""):
                break
    except Terminated:
        log("terminated: the groups finished before are recorded")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if path is None:
        raise ProfileError("nothing was profiled: " + json.dumps(meta["groups"]))
    return path
