"""Collection over the whole tree (`--doctest-modules` imports every module of fedeval/): the
Flower package needs its optional extra, so without Flower installed its modules are not
collected (their tests skip with the reason, tests/test_flower*.py)."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("flwr") else ["fedeval/flower/*"]
