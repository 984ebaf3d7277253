"""The protocol as messages: the public parameters of a run, its steps, and what travels.

Nothing here imports Flower. A message is a plain dict of str → int, float, str, bytes or a numpy
array (`fedeval.flower.records` turns it into a Flower `RecordDict` and back), so the same steps
run over Flower's simulation engine, over SuperLink/SuperNodes, or called in process
(`fedeval.flower.inprocess`) with no engine at all.

One protocol run (`ServerProtocol.run`), over the cohort of nodes that answer:

1. ``keys``: every client makes a fresh X25519 key pair for the run (OS CSPRNG) and replies
   with its public key. The private key stays in the client's own state; the server never sees
   one. Every later round binds its pair keys to its own random round id (HKDF info), so the
   masks of different rounds are independent and a pair key revealed for one round says
   nothing of another; a new key round is needed only for a node that missed this one.
   Roster indices are the nodes' ids in sorted order (Flower's ids are random, so the order
   says nothing about the data).
2. ``probe`` (two-phase ``--height auto`` under distdp or localdp, `fedeval.privacy.probe`):
   distdp, each client's per-class counts of the probe's cells plus a Pólya share sized to the
   cohort, masked; localdp, each report slot is a probe report with probability s and its OUE
   bits of (label, cell) are sent bare (local DP needs no masks). The server sums them, releases
   the noisy histogram and chooses the height from it alone (`fedeval.privacy.probe.height`,
   the rule every other path uses), then broadcasts it with step 3.
3. ``report``: the client's report as `fedeval encode` makes it, with the same mechanism code
   (`fedeval.privacy.registry.model_of(model).client_reports`: one-hot level counts; plus a Pólya
   share sized to the cohort under distdp; OUE reports under localdp, exactly L per client
   under unit client), then under federated and distdp its pairwise masks: for each of its 2K
   neighbours on the circulant graph (`fedeval.secagg`), the pair key agreed with the
   neighbour's relayed public key (`secagg.agree_pair_key`: X25519 + HKDF-SHA256 bound to the
   ordered pair and the round), expanded by AES-256-CTR (`secagg.prg`) and added or subtracted
   mod 2^32. The masks cancel in the cohort's sum; one report is uniform to the server.
4. Dropouts. Federated: the survivors reveal the pair keys they shared with the clients that
   sent nothing (``reveal``), and the server removes the masks that no longer cancel
   (`secagg.recovery_correction`), unless a survivor lost every neighbour (its report would be
   exposed: `secagg.exposed_survivors`), when the round is re-run. Distdp: a lost client takes
   its noise share with it, so the sum would carry less noise than the claim; nothing is
   revealed and the round is re-run over the survivors with fresh masks and shares sized to
   them (the first round's sum is never unmasked). Localdp: reports need no masks; a lost
   client's reports are simply absent. At most `retries` re-runs, and never below
   `min_cohort` clients.

The server keeps only sums: the release (`fedeval.release.Release.of_cohort`, which drops
every exact count the mechanism may not publish) is what it writes, sealed, in the schema
`fedeval aggregate` writes (`fedeval.releasefile`).

Trust: as in `fedeval.secagg`, the server is honest but curious: it relays public keys
faithfully, reports dropouts truthfully and discards a late reply from a client it declared
lost (a late masked report after a reveal would be unmasked). Each client refuses a reveal that
would expose all of its own keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedeval.core.axis import ScoreAxis
from fedeval.core.config import PrivacyConfig, config_dict, config_from_dict
from fedeval.core.errors import UsageError

Payload = dict[str, Any]
"""One message's content: str → int, float, str, bytes or numpy array."""

KEYS, PROBE, REPORT, REVEAL = "keys", "probe", "report", "reveal"
STEPS = (KEYS, PROBE, REPORT, REVEAL)
ROUND_ID_BYTES = 16


# --------------------------------------------------------------------------------------------
# The public parameters of one run


@dataclass(frozen=True)
class Job:
    """What every client of one protocol run is told: the configuration (before a two-phase
    probe, its placeholder height), the score axis the leaves cut (public: it depends on the
    options alone), the resolution data are read at, the positive label, and for a
    reproducible simulation its seed (then the release says it is not private)."""

    config: PrivacyConfig
    axis: ScoreAxis
    resolution: int
    pos_label: str | None = None
    seed: int | None = None
    masked: bool = True  # False only to measure what the masks cost: reports travel bare

    def to_text(self) -> str:
        return json.dumps(
            {
                "config": config_dict(self.config),
                "probe_share": self.config.probe_share,
                "axis": self.axis.to_dict(),
                "resolution": self.resolution,
                "pos_label": self.pos_label,
                "seed": self.seed,
                "masked": self.masked,
            },
            sort_keys=True,
        )

    @classmethod
    def from_text(cls, text: str) -> Job:
        d = json.loads(text)
        cfg = config_from_dict(d["config"] | {"probe_share": d["probe_share"]})
        return cls(
            cfg,
            ScoreAxis.from_dict(d["axis"]),
            int(d["resolution"]),
            d["pos_label"],
            None if d["seed"] is None else int(d["seed"]),
            bool(d.get("masked", True)),
        )


@dataclass(frozen=True)
class ClientData:
    """Where a client's own rows are (its node config): a Parquet/CSV file and its columns."""

    path: str
    score_col: str = "score"
    label_col: str = "label"


def client_data_from(node_config: Mapping[str, Any]) -> ClientData:
    """A client's data location from its node config (`data-path`, optional `score-col`,
    `label-col`)."""
    path = node_config.get("data-path")
    if not path:
        raise UsageError(
            "this node has no `data-path` in its node config: start it with "
            "`flower-supernode --node-config \"data-path='rows.parquet'\" ...`."
        )
    return ClientData(
        str(path),
        str(node_config.get("score-col", "score")),
        str(node_config.get("label-col", "label")),
    )
