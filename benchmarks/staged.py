"""Time, memory and bytes of the staged protocol: partition → encode → aggregate → evaluate --from.

For 100k and 1M clients holding one example each, and per privacy model (federated, distdp
ε = 1, localdp OUE ε = 5), every step runs as the CLI runs it, in a fresh process:

    fedeval partition scores.parquet --clients N --scheme iid -o clients.parquet
    fedeval encode clients.parquet -m MODEL [--epsilon E] --height H -o reports/
    fedeval aggregate reports/ -o run.fedeval
    fedeval evaluate --from run.fedeval

Each step's wall time (measured by this script around the child, so it includes starting Python
and importing fedeval, ≈ 0.5–1 s) and peak RSS (the child's own `VmHWM`, as in `speed.py`) are
printed, with the bytes on disk of clients.parquet, the report directory (and per client) and
the aggregate. The partition is shared by the three models. The aggregate reads reports that
were just written, so it reads them from the page cache, not the disk.

Heights. `--height auto` where the reports stay affordable. Under federated and distdp every
client sends a masked vector of D = Σ 2·2^k + 1 uint32 entries (k over the released levels), and
secure aggregation costs O(n·K·D) with K = ⌈log2 n⌉ masking neighbours per side; distdp also
draws D Pólya shares per client. So:

- federated runs at h = 8 flat (FEDERATED_HEIGHT): auto picks h = 16 flat, D = 131,073 entries,
  524,292 B (512 KiB) per client: 52 GB of reports at 100k clients and 524 GB at 1M, infeasible;
- distdp and localdp run at the auto height, lowered one level at a time while the cohort's
  reports would exceed MAX_REPORT_ENTRIES = 2^30 entries (4 GiB). At 1M clients that turns
  distdp's auto h = 9 (D = 2,045: 8.2 GB and ≈ 7 min of encoding on a 2-core machine) into
  h = 8 (D = 1,021: 4.1 GB, ≈ 3.5 min, about half of it drawing the Pólya shares). localdp
  reports are not masked (one level's OUE bits per example, a few bytes) and never hit the cap.

The height column says which rule applied. A second table gives the bytes each client sends
per model and height (h ∈ {4, 6, 8, 10, 12, 16}, each model's own shape: federated flat,
distdp and localdp hierarchy): its payload (`fedeval.protocol.encode.bytes_per_report`: 4 bytes per
masked entry; under localdp one level's packed OUE bits plus its level index, averaged over the
levels) and the Parquet bytes per client of a small `encode_file` run (parts only, plain and
uncompressed as encode writes them; localdp rows also hold the client index and level).

Correctness: the federated aggregate must equal, count for count, the release the one-shot
`fedeval evaluate scores.parquet -m federated --height 8 --save-release` simulates from the raw
table (PASS/FAIL per client count).

Data: `benchmarks/_data/staged_scores_<rows>.parquet` (gitignored), made on first use by
`sample_data/make_sample.py --rows <rows>` (seeded). Work files go to a temporary directory under
`benchmarks/_data/` and are removed as soon as the next step has read them (at most ≈ 4 GB at
a time).

    .venv/bin/python benchmarks/staged.py            # 100k and 1M clients (≈ 6 min)
    .venv/bin/python benchmarks/staged.py --quick    # 100k clients only (≈ 1 min)

The tables go to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common import DATA_DIR, ROOT

if TYPE_CHECKING:
    from fedeval.core.config import PrivacyConfig

# fedeval, numpy and pyarrow are imported where they are used: this file is also the fresh child
# process of every step (`--child`), which must hold only what the `fedeval` command loads.

DEFAULT_CLIENTS = (100_000, 1_000_000)
QUICK_CLIENTS = (100_000,)
SEED = 1

FEDERATED_HEIGHT = 8
"""Federated's fixed height: auto (h = 16 flat) would send 512 KiB per client (module docstring)."""

MAX_REPORT_ENTRIES = 1 << 30
"""Largest cohort of masked reports (clients × entries, 4 bytes each) a row may write; above it
the height is lowered from auto one level at a time."""

SIZE_HEIGHTS = (4, 6, 8, 10, 12, 16)
SIZE_CLIENTS_MASKED = 256
"""Clients of the small encodes behind the bytes-per-client table (masked models): at h = 16 a
distdp report is 1 MB, so a few hundred clients already make the Parquet overhead negligible."""
SIZE_CLIENTS_LOCAL = 4096
"""localdp clients each report one random level, whose size grows as 2^k: more clients keep the
measured mean near the average over levels."""

STEPS = ("partition", "encode", "aggregate", "evaluate --from")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Setting:
    model: str
    epsilon: float | None

    @property
    def label(self) -> str:
        return self.model if self.epsilon is None else f"{self.model} ε={self.epsilon:g}"


SETTINGS = (Setting("federated", None), Setting("distdp", 1.0), Setting("localdp", 5.0))


# ---------------------------------------------------------------------------------------------
# Data


def ensure_scores(rows: int) -> Path:
    """`rows` fresh scored examples from the sample's own generator (seeded, made on first use)."""
    import pyarrow.parquet as pq

    path = DATA_DIR / f"staged_scores_{rows}.parquet"
    if path.exists() and pq.ParquetFile(path).metadata.num_rows == rows:
        return path
    log(f"making {path.name} with sample_data/make_sample.py --rows {rows} …")
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    script = ROOT / "sample_data" / "make_sample.py"
    cmd = [sys.executable, str(script), "--rows", str(rows), "-o", str(path)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return path


# ---------------------------------------------------------------------------------------------
# Heights


@dataclass(frozen=True)
class Choice:
    """The height a row runs at, the height auto would pick, and why they differ."""

    config: PrivacyConfig
    auto: PrivacyConfig
    rule: str

    @property
    def cli_height(self) -> str:
        """What `--height` gets: the height itself (under DP `auto` is two-phase and chooses
        from its probe, so a run sized in advance gives the height the n-rule predicts)."""
        return str(self.config.height)


def report_entries(config: PrivacyConfig) -> int:
    from fedeval.protocol.encode import report_length

    return report_length(config)


def choose_height(setting: Setting, n: int) -> Choice:
    from fedeval.core.params import resolve_config

    def cfg(height):
        # A staged run encodes at a given height; auto's one-phase rule from n predicts it.
        return resolve_config(
            setting.model, n=n, epsilon=setting.epsilon, height=height, probe=False
        )

    auto = cfg("auto")
    if setting.model == "federated":
        return Choice(cfg(FEDERATED_HEIGHT), auto, "fixed")
    if setting.model == "localdp":  # unmasked: one level's bits per example, never large
        return Choice(auto, auto, "auto")
    h = auto.height
    while h > 1 and n * report_entries(cfg(h)) > MAX_REPORT_ENTRIES:
        h -= 1
    return Choice(cfg(h), auto, "auto" if h == auto.height else "capped")


def height_text(choice: Choice) -> str:
    c = choice.config
    return f"{c.height} {c.shape.value}" + ("" if choice.rule == "auto" else f" ({choice.rule})")


def height_notes(clients: list[int]) -> list[str]:
    """One line per (clients, model) whose height is not auto's, saying why."""
    from fedeval.protocol.encode import bytes_per_report

    notes = []
    for n in clients:
        for s in SETTINGS:
            ch = choose_height(s, n)
            if ch.rule == "auto":
                continue
            a = ch.auto
            total = n * bytes_per_report(a)
            why = (
                f"auto picks h = {a.height} {a.shape.value}: D = {report_entries(a):,} entries, "
                f"{bytes_per_report(a):,.0f} B per client, {total / 1e9:,.1f} GB for the cohort"
            )
            if ch.rule == "fixed":
                why += f"; run at h = {FEDERATED_HEIGHT} (FEDERATED_HEIGHT) instead"
            else:
                why += (
                    f", over the cap of {MAX_REPORT_ENTRIES:,} entries; lowered to "
                    f"h = {ch.config.height} (D = {report_entries(ch.config):,})"
                )
            notes.append(f"{n:,} clients, {s.label}: {why}.")
    return notes


# ---------------------------------------------------------------------------------------------
# One CLI step in a fresh process


@dataclass(frozen=True)
class Step:
    clients: int
    setting: Setting | None  # None: the partition, shared by every model
    height: str
    step: str
    seconds: float
    peak_mb: float
    disk_bytes: int  # what the step wrote
    per_client: float | None = None  # disk bytes per client (the report directory)


def run_cli_child(peak_file: str, args: list[str]) -> int:
    """Run `fedeval ARGS` in this process, then write its peak RSS (MB) to `peak_file`."""
    from fedeval.cli import main as cli_main

    sys.argv = ["fedeval", *args]
    code = 0
    try:
        cli_main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    from speed import own_peak_rss_mb  # after the work: its numpy and pyarrow are loaded by now

    Path(peak_file).write_text(f"{own_peak_rss_mb():.1f}\n")
    return code


def run_cli(args: list[str], work: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of `fedeval ARGS` run once in a fresh interpreter."""
    peak_file = work / "peak.txt"
    peak_file.unlink(missing_ok=True)
    args = [str(a) for a in args]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(peak_file), *args]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"fedeval {' '.join(args)} failed:\n{done.stderr}")
    return seconds, float(peak_file.read_text())


def disk_bytes(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.iterdir())
    return path.stat().st_size


def same_release(a, b) -> bool:
    import numpy as np

    return (
        a.config == b.config
        and a.n_clients == b.n_clients
        and np.array_equal(a.counts, b.counts)
        and np.array_equal(a.reporters, b.reporters)
    )


def pipeline(n: int, work: Path) -> tuple[list[Step], str]:
    """Every step for `n` clients and every model; and the federated correctness line."""
    from fedeval.documents.release_file import load_release

    source = ensure_scores(n)
    clients = work / "clients.parquet"
    log(f"{n:,} clients: partition …")
    seconds, peak = run_cli(
        ["partition", source, "--clients", n, "--scheme", "iid", "--seed", SEED, "-o", clients],
        work,
    )
    steps = [Step(n, None, "", "partition", seconds, peak, disk_bytes(clients))]
    check = f"{n:,} clients: no federated row"
    for s in SETTINGS:
        choice = choose_height(s, n)
        reports, run = work / f"reports-{s.model}", work / f"{s.model}.fedeval"
        eps = [] if s.epsilon is None else ["--epsilon", s.epsilon]
        h = height_text(choice)
        log(f"{n:,} clients, {s.label}, h = {h}: encode …")
        args = ["encode", clients, "-m", s.model, *eps, "--height", choice.cli_height]
        seconds, peak = run_cli([*args, "--seed", SEED, "-o", reports], work)
        manifest = json.loads((reports / "manifest.json").read_text())
        if manifest["privacy"]["height"] != choice.config.height:
            raise RuntimeError(f"encode ran at {manifest['privacy']} , expected {choice.config}")
        size = disk_bytes(reports)
        steps.append(Step(n, s, h, "encode", seconds, peak, size, size / n))
        log(f"  {seconds:.1f} s, {peak:.0f} MB, {size / 1e6:,.1f} MB on disk; aggregate …")
        seconds, peak = run_cli(["aggregate", reports, "-o", run], work)
        shutil.rmtree(reports)
        steps.append(Step(n, s, h, "aggregate", seconds, peak, disk_bytes(run)))
        log(f"  {seconds:.1f} s, {peak:.0f} MB; evaluate --from …")
        seconds, peak = run_cli(["evaluate", "--from", run], work)
        steps.append(Step(n, s, h, "evaluate --from", seconds, peak, 0))
        if s.model == "federated":
            log(f"  one-shot evaluate {source.name} -m federated --save-release …")
            oneshot = work / "oneshot.fedeval"
            height = ["--height", choice.config.height]
            t_one, _ = run_cli(
                ["evaluate", source, "-m", "federated", *height, "--save-release", oneshot], work
            )
            staged, _ = load_release(run)
            direct, _ = load_release(oneshot)
            ok = same_release(staged, direct)
            check = (
                f"{'PASS' if ok else 'FAIL'}: {n:,} clients, federated h = {h}: the staged "
                f"aggregate {'equals' if ok else 'DIFFERS FROM'} the one-shot release "
                f"(`evaluate FILE --save-release`, {t_one:.1f} s) count for count "
                f"({len(staged.counts):,} nodes, {staged.examples:,} examples)"
            )
            oneshot.unlink()
        run.unlink()
    clients.unlink()
    return steps, check


# ---------------------------------------------------------------------------------------------
# Bytes each client sends


@dataclass(frozen=True)
class Size:
    setting: Setting
    config: PrivacyConfig
    entries: int | None  # masked report length D (None under localdp)
    payload: float  # bytes_per_report
    parquet: float  # measured Parquet bytes per client


def report_sizes(source: Path, work: Path) -> list[Size]:
    import pyarrow.parquet as pq

    from fedeval.protocol.encode import bytes_per_report, encode_file

    table = pq.read_table(source, columns=["score", "label"])
    sizes = []
    for s in SETTINGS:
        n = SIZE_CLIENTS_MASKED if s.model != "localdp" else SIZE_CLIENTS_LOCAL
        small = work / f"small-{n}.parquet"
        if not small.exists():
            pq.write_table(table.slice(0, n), small)
        for h in SIZE_HEIGHTS:
            out = work / f"size-{s.model}-{h}"
            log(f"report size: {s.label}, h = {h}, {n} clients …")
            summary = encode_file(small, out, model=s.model, epsilon=s.epsilon, height=h, seed=SEED)
            shutil.rmtree(out)
            cfg = summary.config
            sizes.append(
                Size(
                    s,
                    cfg,
                    None if s.model == "localdp" else report_entries(cfg),
                    bytes_per_report(cfg),
                    summary.report_bytes / summary.clients,
                )
            )
    return sizes


# ---------------------------------------------------------------------------------------------
# Tables


def format_table(header: tuple[str, ...], rows: list[tuple[str, ...]], left: int) -> str:
    """Aligned columns: the first `left` to the left, the rest to the right."""
    cells = [header, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [
        "  ".join(
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def size_text(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes:,.0f} B"


def steps_table(steps: list[Step]) -> str:
    header = ("clients", "model", "height", "step", "time s", "peak RSS MB", "written")
    header += ("per client",)
    rows = [
        (
            f"{r.clients:,}",
            "(all)" if r.setting is None else r.setting.label,
            r.height,
            r.step,
            f"{r.seconds:.1f}",
            f"{r.peak_mb:.0f}",
            size_text(r.disk_bytes) if r.disk_bytes else "",
            "" if r.per_client is None else f"{r.per_client:,.0f} B",
        )
        for r in steps
    ]
    return format_table(header, rows, left=4)


def totals(steps: list[Step]) -> list[str]:
    """Per client count and model: the pipeline's total time and largest peak."""
    lines = []
    for n in dict.fromkeys(r.clients for r in steps):
        part = next(r for r in steps if r.clients == n and r.setting is None)
        for s in SETTINGS:
            mine = [r for r in steps if r.clients == n and r.setting == s]
            if not mine:
                continue
            top = max([part, *mine], key=lambda r: r.peak_mb)
            enc = next(r for r in mine if r.step == "encode")
            total = part.seconds + sum(r.seconds for r in mine)
            lines.append(
                f"{n:,} clients, {s.label}, h = {enc.height}: {total:.1f} s in all "
                f"(encode {enc.seconds / total:.0%}), peak {top.peak_mb:.0f} MB ({top.step})"
            )
    return lines


def sizes_table(sizes: list[Size]) -> str:
    header = (
        "model",
        "shape",
        "h",
        "entries D",
        "payload B",
        "Parquet B/client",
        "payload × 1M clients",
    )
    rows = [
        (
            z.setting.label,
            z.config.shape.value,
            str(z.config.height),
            "—" if z.entries is None else f"{z.entries:,}",
            f"{z.payload:,.1f}",
            f"{z.parquet:,.1f}",
            f"{z.payload * 1e6 / 1e9:,.3f} GB",
        )
        for z in sizes
    ]
    return format_table(header, rows, left=2)


# ---------------------------------------------------------------------------------------------


def parse_clients(text: str) -> list[int]:
    try:
        clients = [int(float(part)) for part in text.split(",") if part.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated counts, got {text!r}") from e
    if not clients or min(clients) < 2:
        raise argparse.ArgumentTypeError(f"client counts must be at least 2, got {text!r}")
    return clients


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:  # internal: one CLI step in this fresh process (see run_cli)
        return run_cli_child(argv[1], argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100k clients only (≈ 1 min)")
    parser.add_argument(
        "--clients",
        type=parse_clients,
        default=None,
        help="comma-separated client counts (default: 100000,1000000)",
    )
    args = parser.parse_args(argv)
    clients = args.clients or list(QUICK_CLIENTS if args.quick else DEFAULT_CLIENTS)

    t0 = time.perf_counter()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    steps, checks = [], []
    with tempfile.TemporaryDirectory(prefix="staged-", dir=DATA_DIR) as tmp:
        work = Path(tmp)
        for n in clients:
            s, c = pipeline(n, work)
            steps += s
            checks.append(c)
        sizes = report_sizes(ensure_scores(min(clients)), work)

    print(
        "Staged protocol, one example per client, iid partition; each step a fresh "
        "`fedeval` process (time: wall, incl. start-up; peak: the process's VmHWM)."
    )
    print(steps_table(steps))
    print()
    for line in totals(steps):
        print(line)
    print()
    print("Heights other than auto's:")
    for line in height_notes(clients):
        print(f"  {line}")
    print()
    print(
        "Bytes each client sends: payload = fedeval.protocol.encode.bytes_per_report "
        "(4 B per masked entry; localdp: one level's packed OUE bits + 1 B level index, "
        "mean over levels); "
        f"Parquet = measured report bytes per client ({SIZE_CLIENTS_MASKED} clients masked, "
        f"{SIZE_CLIENTS_LOCAL} localdp)."
    )
    print(sizes_table(sizes))
    print()
    for line in checks:
        print(line)
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return 0 if all(c.startswith("PASS") for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
