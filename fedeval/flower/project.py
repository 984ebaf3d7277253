"""`fedeval flower new DIR`: a ready Flower app project for a deployment across machines.

The project holds no code of its own: its components are fedeval's ClientApp and ServerApp
(installed with ``pip install 'fedeval[flower]'`` on every machine), and its run config the
protocol's settings with the defaults of ``fedeval evaluate``. The README gives the exact
commands: one ``flower-superlink``, one ``flower-supernode`` per data holder (its rows named in
``--node-config``), then ``flwr run``.
"""

from __future__ import annotations

import os
from pathlib import Path

from fedeval.core.errors import UsageError
from fedeval.core.version import __version__
from fedeval.flower.settings import RunSettings

SUPERLINK_PORT = 9092
"""The port the commands in the README use for the SuperLink's HTTP API (Flower's default is
8000; any free port works, the same in every command)."""


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def pyproject_text(name: str, settings: RunSettings) -> str:
    """The project's pyproject.toml: `[tool.flwr.app]` with fedeval's components and the run
    config (every protocol setting, plus where the server writes the release)."""
    config = settings.to_run_config() | {
        "release-path": "release.fedeval",
        "sign-key": "",
        "min-nodes": settings.min_cohort,
        "wait-nodes": 120.0,
    }
    lines = "\n".join(f"{k} = {_toml_value(v)}" for k, v in config.items())
    return f"""[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "{name}"
version = "1.0.0"
description = "Private evaluation of a classifier on data that stays with its holders"
dependencies = ["fedeval[flower]=={__version__}"]

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "fedeval"

[tool.flwr.app.components]
serverapp = "fedeval.flower.server_app:app"
clientapp = "fedeval.flower.client_app:app"

# The protocol's settings (the defaults of `fedeval evaluate`). Override one per run with
# `flwr run . fedeval --run-config "model='federated'"`.
[tool.flwr.app.config]
{lines}
"""


def readme_text(name: str, port: int = SUPERLINK_PORT) -> str:
    return f"""# {name}: private evaluation on Flower

This Flower app runs fedeval's protocol between data holders (SuperNodes) and an aggregator
(SuperLink): each holder encodes its own scored, labelled rows (secure-aggregation masks agreed
with its neighbours; noise shares under distdp; local DP reports under localdp), the server
sums them into one private release, and anyone with the release estimates ROC AUC,
precision/recall/accuracy, curves and calibration from it:
`fedeval evaluate --from release.fedeval`. The settings are in `pyproject.toml`
(`[tool.flwr.app.config]`).

Install on every machine (the same version everywhere):

```sh
pip install 'fedeval[flower]=={__version__}'
```

Machines without network access must not try to install the app's dependencies at run time:

```sh
export FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1
```

1. The aggregator starts the SuperLink (drop `--insecure` and pass `--ssl-certfile`,
   `--ssl-keyfile`, `--ssl-ca-certfile` outside a trusted network):

   ```sh
   flower-superlink --insecure --port {port}
   ```

2. Every data holder starts one SuperNode on its own machine, naming its rows (Parquet or CSV
   with a `score` and a `label` column; other names with `score-col` and `label-col`):

   ```sh
   flower-supernode --insecure --superlink AGGREGATOR:{port} \\
       --node-config "data-path='/data/scores.parquet' score-col='score' label-col='label'"
   ```

   Two SuperNodes on one machine need their own `--port` each (default 9094).

3. Whoever runs the evaluation points Flower at the SuperLink once, in
   `$FLWR_HOME/config.toml` (default `~/.flwr/config.toml`):

   ```toml
   [superlink]
   default = "fedeval"

   [superlink.fedeval]
   address = "AGGREGATOR:{port}"
   insecure = true
   ```

   and starts the run from this directory:

   ```sh
   flwr run . fedeval --stream
   ```

   The server waits for `min-nodes` SuperNodes (at most `wait-nodes` seconds), runs the
   rounds, and writes the sealed release to `release-path` on the aggregator (relative to
   the directory the SuperLink was started in; `sign-key` names an Ed25519 key from
   `fedeval keygen` to sign it). Then:

   ```sh
   fedeval evaluate --from release.fedeval
   ```

What each party learns is stated in the release's privacy section: the server sees who takes
part and each cohort's sum (masked reports cancel in it; a holder's report alone is uniform to
the server), and under distdp or localdp that sum is ε-DP. A holder that vanishes mid-run is
handled: under federated its neighbours reveal the masks they shared with it, under distdp the
round is re-run without it (fresh masks and noise), under localdp its reports are just absent.
"""


def write_project(directory: str | os.PathLike[str], settings: RunSettings | None = None) -> Path:
    """Write the project into `directory` (new, or empty); returns it."""
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"'{target}' already exists and is not an empty directory.")
    settings = settings or RunSettings()
    settings.job()  # every option checked before anything is written
    name = "".join(c if c.isalnum() else "-" for c in target.resolve().name).strip("-").lower()
    name = name or "fedeval-app"
    try:
        target.mkdir(parents=True, exist_ok=True)
        (target / "pyproject.toml").write_text(pyproject_text(name, settings))
        (target / "README.md").write_text(readme_text(name))
    except OSError as e:
        raise UsageError(f"cannot write '{target}': {e.strerror or e}.") from None
    return target
