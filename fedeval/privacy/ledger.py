"""The privacy budget ledger (v3): every release charged against a stored budget, per dataset.

A ledger is a JSON Lines file. Its first line is a header that stores the budget, fixed when the
ledger is created::

    {"schema": "fedeval.ledger/3", "budget": {"epsilon": 3.0, "delta": 0.0}, "created": "…",
     "prev": "000…0", "integrity": {"sha256": "…"}}

and every further line is one release (`make_entry`): time, command, what it covered, the dataset
label, model, unit, neighbouring relation, ε, δ, the machine-readable DP event, the mechanism,
the fedeval version and, where known, the digest of the release it charged (``release``: the
SHA-256 in the saved release's seal), so that one release is charged once however often it is
read. A ledger records no seed and no file path.

Every line is sealed into a hash chain (`fedeval.ledger_chain`): it carries the digest of the
line before it, the header (and so the budget) first. Raising the budget, editing, removing or
reordering a line breaks the chain and the ledger is refused; a signed ledger (every line signed
with the key that signed its header) cannot be rewritten without that key. A ledger is a record,
not a lock: whoever can write the file can also delete it.

Totals are per dataset, and a total composes releases about the same people only: within one
dataset every entry must share the unit of privacy (example or client) and the neighbouring
relation (add-remove or replace). The budget applies to each dataset's total. Checking and
appending happen under a file lock, so concurrent runs cannot both slip under the budget or lose
an entry. A `--seed` run is a reproducible simulation, not a private release, and is refused.

Composition (see `total_epsilon`):

* Every event pure ε-DP (distdp's discrete Laplace, OUE local DP): ε = Σ ε_i at δ = 0. This is
  exact: the privacy loss of a composition is the sum of independent losses, so its largest
  value (which is ε at δ = 0) is the sum of the largest values, Σ ε_i; no accountant can do
  better at δ = 0. It needs no accountant, and so cannot fail for any Δ. dp_accounting's PLD
  accountant was not used for this: at δ = 0 it returns ε = ∞ whenever a privacy-loss pmf
  becomes dense (its pessimistic tail truncation puts 1e-15 of mass at +∞ on every dense
  self-composition and composition, and a pmf turns dense past 1000 loss values), which happens
  for one discrete Laplace event with Δ ≥ 1000 and, with Δ = 1, for a ledger of about 60–100
  releases; its construction also lists every integer in [−Δ, 0], a MemoryError for
  Δ = L·levels = 3·10^9; and it rounds each ε up to a 1e-4 grid.
* Any Gaussian event (multiclass user-level DP): ε at the ledger's δ by one dp_accounting
  `RdpAccountant` over every event of the dataset. The Gaussian's RDP curve α/(2z²) is exact
  (it is the zCDP the multiclass paper accounts with) and composes k-fold without
  discretisation. A pure ε-DP event enters as binary randomized response with the same ε
  (`RandomizedResponseDpEvent`, two buckets, p = 2/(1 + e^ε)): every pure ε-DP mechanism is a
  post-processing of it (Kairouz, Oh & Viswanath 2015), so its Rényi divergences are an upper
  bound, whatever Δ; for discrete Laplace with Δ = 1 it is exact (that pair is binary
  randomized response). The ledger reports the smaller of that and basic composition
  Σ ε_pure + ε_Gaussian(δ) — both are valid (ε, δ) bounds for the same composition. The Rényi
  orders are dp_accounting's defaults plus the grid the Gaussian noise is calibrated on
  (`fedeval.privacy.accounting.CALIBRATION_ORDERS`), so a release calibrated to exactly (ε, δ)
  is charged at most ε (`fedeval.privacy.accounting`, the one accountant).
"""

from __future__ import annotations

import json
import math
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from fedeval.core.config import Relation, Unit
from fedeval.core.errors import FedevalError, InputError, UsageError
from fedeval.privacy.accounting import (
    check_same_units,
    compose,
    composition,
    entry_events,
    is_pure,
    leaves,
)
from fedeval.privacy.events import DpEvent, NoNoiseEvent, PureEvent, event_from_dict
from fedeval.privacy.ledger_file import (
    GENESIS,
    check_chain,
    check_signer,
    check_writable,
    head,
    json_lines,
    link,
    locked,
    signer,
)

SCHEMA = "fedeval.ledger/3"
ENTRY_SCHEMA = "fedeval.ledger-entry/3"
V1_ENTRY_SCHEMA = "fedeval.ledger-entry/1"
V2_SCHEMAS = ("fedeval.ledger/2", "fedeval.ledger-entry/2")
TOLERANCE = 1e-9
"""Relative slack when comparing a total with the budget, or an ε with its event (rounding)."""
DEFAULT_DATASET = "default"
_DATASET_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+=-]{0,127}")
_LEAKY_KEYS = frozenset({"seed", "source", "path"})


class BudgetExceeded(FedevalError):
    """The release would take the ledger past its budget; nothing was released."""


# --- entries ---------------------------------------------------------------------------------


def _check_dataset(dataset: Any) -> str:
    if not isinstance(dataset, str) or not _DATASET_LABEL.fullmatch(dataset):
        raise UsageError(
            f"the dataset must be a short label (letters, digits, _ . : @ + = -), not a file "
            f"path. Found {dataset!r}."
        )
    return dataset


def make_entry(
    doc: dict[str, Any],
    *,
    command: str,
    covered: str,
    dataset: str = DEFAULT_DATASET,
    release: str | None = None,
) -> dict[str, Any]:
    """A ledger entry for the release described by a document's privacy section; `release` is
    the release's digest (its charge id: `release_digest`), recorded so that it is charged once.

    Refuses releases that add no noise, documents without a DP event, and reproducible (--seed)
    simulations. The entry holds no seed and no file path.
    """
    p = doc.get("privacy") if isinstance(doc, dict) else None
    if not isinstance(p, dict):
        raise UsageError("this document has no privacy section: nothing to charge.")
    event = p.get("dp_event")
    if event is None:
        if p.get("model") == "federated":
            leaves(NoNoiseEvent())
        raise UsageError(
            "this document's privacy section states no dp_event (written by an older fedeval?): "
            "it cannot be charged."
        )
    leaves(event_from_dict(event))
    if p.get("reproducible_simulation"):
        raise UsageError(
            "a `seed` run is a reproducible simulation, not a private release; it cannot be "
            "charged to a privacy budget. Run without `seed` to make a private release."
        )
    mechanism = p.get("mechanism") or {}
    return {
        "schema": ENTRY_SCHEMA,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "covered": covered,
        "dataset": _check_dataset(dataset),
        "model": p.get("model"),
        "unit": p.get("unit"),
        "relation": p.get("relation"),
        "epsilon": p.get("epsilon"),
        "delta": p.get("delta"),
        "sampler_delta": p.get("sampler_delta"),
        "dp_event": event,
        "mechanism": {k: v for k, v in mechanism.items() if k not in _LEAKY_KEYS},
        "fedeval_version": doc.get("fedeval_version"),
        **({} if release is None else {"release": _check_digest(release)}),
    }


def _check_digest(release: Any) -> str:
    if not isinstance(release, str) or len(release) != 64 or set(release) - set("0123456789abcdef"):
        raise UsageError(f"a release's charge id is its 64-hex SHA-256. Found {release!r}.")
    return release


def _check_entry(entry: Any) -> DpEvent:
    """Validate an entry before it is charged; its DP event."""
    if not isinstance(entry, dict) or entry.get("schema") != ENTRY_SCHEMA:
        raise UsageError(f"not a fedeval ledger entry (schema {ENTRY_SCHEMA}).")
    if _LEAKY_KEYS & entry.keys():
        raise UsageError("a ledger entry must not record a seed or a file path.")
    _check_dataset(entry.get("dataset"))
    for key, kind in (("unit", Unit), ("relation", Relation)):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise UsageError(f"a ledger entry needs its {key}. Found {entry.get(key)!r}.")
        if entry[key] not in {k.value for k in kind}:
            choices = ", ".join(k.value for k in kind)
            raise UsageError(f"a ledger entry's {key} is one of {choices}. Found {entry[key]!r}.")
    event = event_from_dict(entry.get("dp_event"))
    flat = leaves(event)
    claimed = entry.get("epsilon")
    if isinstance(claimed, bool) or not isinstance(claimed, int | float) or not claimed >= 0:
        raise UsageError(f"a ledger entry needs its ε. Found {claimed!r}.")
    delta = entry.get("delta")
    if delta is not None and (
        isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 <= delta < 1
    ):
        raise UsageError(f"a ledger entry's δ must be in [0, 1). Found {delta!r}.")
    pure = [leaf.epsilon for leaf in flat if isinstance(leaf, PureEvent)]
    if len(pure) == len(flat):
        implied = math.fsum(pure)
        if not math.isclose(claimed, implied, rel_tol=TOLERANCE):
            raise UsageError(
                f"the release's ε ({claimed!r}) disagrees with its dp_event (ε = {implied:g}): "
                "refusing to charge it."
            )
    return event


# --- the file --------------------------------------------------------------------------------


def _check_header(header: Any, where: str) -> dict[str, Any]:
    budget = header.get("budget") if isinstance(header, dict) else None
    eps = budget.get("epsilon") if isinstance(budget, dict) else None
    delta = budget.get("delta") if isinstance(budget, dict) else None
    ok = (
        isinstance(eps, int | float)
        and isinstance(delta, int | float)
        and math.isfinite(eps)
        and eps > 0
        and 0 <= delta < 1
    )
    if not ok:
        raise InputError(f"{where}: the ledger header has no valid budget {{epsilon, delta}}.")
    return cast(dict[str, Any], header)


def read_ledger(
    path: str | os.PathLike[str], *, verify_key: Any = None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The header and entries of a ledger (an absent or empty file: no header, no entries),
    once its hash chain holds (`fedeval.ledger_chain.check_chain`; with `verify_key`, every
    line signed by that Ed25519 public key).

    Version-1 ledgers (entries without a header: their total mixed units) and version-2 ones
    (unsealed: a budget raised by hand went unnoticed) are refused.
    """
    header, entries, _, _ = _read(Path(path), verify_key)
    return header, entries


def _read(
    path: Path, verify_key: Any = None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], str, str | None]:
    """(header, entries, the chain's head, the hex public key that signs it or None)."""
    if not path.exists():
        return None, [], GENESIS, None
    header: dict[str, Any] | None = None
    entries: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    for i, item in json_lines(path):
        where = f"ledger '{path}', line {i}"
        schema = item.get("schema") if isinstance(item, dict) else None
        if schema == V1_ENTRY_SCHEMA:
            raise InputError(
                f"ledger '{path}' is a version-1 fedeval ledger: its total added "
                "example-level and client-level ε (and every dataset's) as if they were one "
                "unit, and it stored no budget, so it cannot be continued. Keep it as a "
                "record and start a new ledger under a new name, giving its budget ε once."
            )
        if schema in V2_SCHEMAS:
            raise InputError(
                f"ledger '{path}' is a version-2 fedeval ledger: its lines are not sealed, so a "
                "budget raised or an entry deleted by hand would go unnoticed, and it cannot be "
                "continued. Keep it as a record and start a new ledger under a new name, giving "
                "its budget ε once (and the ε it has spent, as you see fit)."
            )
        if schema == SCHEMA:
            if header is not None or entries:
                raise InputError(f"{where}: a ledger header may only be the first line.")
            header = _check_header(item, where)
        elif schema == ENTRY_SCHEMA:
            if header is None:
                raise InputError(f"{where}: an entry before the ledger header.")
            try:  # an edited entry must not crash the total or the table later
                _check_entry(item)
                if "release" in item:
                    _check_digest(item["release"])
            except UsageError as e:
                raise InputError(f"{where}: {e}", file=str(path), row=i) from None
            entries.append(item)
        else:
            raise InputError(f"{where}: not a fedeval ledger entry.")
        items.append(item)
    head = check_chain(items, f"'{path}'", verify_key=verify_key)
    return header, entries, head, signer(items[0]) if items else None


def charged(path: str | os.PathLike[str], release: str, *, verify_key: Any = None) -> bool:
    """Whether the ledger holds an entry for the release with digest `release`."""
    _, entries = read_ledger(path, verify_key=verify_key)
    return any(e.get("release") == release for e in entries)


def _group(entries: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        groups.setdefault(e.get("dataset", DEFAULT_DATASET), []).append(e)
    return groups


def totals(header: dict[str, Any] | None, entries: list[dict[str, Any]]) -> dict[str, float]:
    """Each dataset's composed ε (`total_epsilon` at the ledger's δ)."""
    delta = float(header["budget"]["delta"]) if header else 0.0
    out = {}
    for dataset, group in _group(entries).items():
        check_same_units(group, f"dataset '{dataset}'")
        out[dataset] = compose(entry_events(group), delta)
    return out


def check_budget(
    path: str | os.PathLike[str],
    budget: float | None = None,
    delta: float | None = None,
    *,
    verify_key: Any = None,
) -> dict[str, Any] | None:
    """Read the ledger's header and check a given budget (and δ) against the stored one.

    Returns the header (None for a ledger not created yet). Refuses a v1 or malformed ledger, and
    a budget that differs from the stored one.
    """
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        raise UsageError(f"the budget must be a positive, finite ε. Found {budget}.")
    if delta is not None and not 0 <= delta < 1:
        raise UsageError(f"the ledger's δ must be in [0, 1). Found {delta}.")
    header, _ = read_ledger(path, verify_key=verify_key)
    if header is not None:
        stored = header["budget"]
        if (budget is not None and not math.isclose(budget, stored["epsilon"], rel_tol=1e-12)) or (
            delta is not None and not math.isclose(delta, stored["delta"], rel_tol=1e-12)
        ):
            raise UsageError(
                f"ledger '{path}' stores its budget ε = {stored['epsilon']:g}, δ = "
                f"{stored['delta']:g} (fixed when it was created); a different budget is "
                "refused. Give no budget to use the stored one."
            )
    return header


def _admit(
    path: Path,
    entry: dict[str, Any],
    event: DpEvent,
    budget: float | None,
    delta: float | None,
    sign_key: Any = None,
    verify_key: Any = None,
) -> tuple[dict[str, Any], bool, float, str]:
    """(header, whether it is new, the dataset's total after `entry`, the chain's head) if the
    ledger can take `entry`; else the error `charge` raises, with nothing written."""
    check_budget(path, budget, delta, verify_key=verify_key)
    stored, entries, head, key = _read(path, verify_key)
    check_signer(path, key, sign_key, stored is None)
    dataset = entry["dataset"]
    header: dict[str, Any]
    if stored is not None:
        header = stored
    else:
        if budget is None:
            raise UsageError(
                f"ledger '{path}' does not exist yet: give its budget to create it "
                "(an ε); it is stored in the ledger."
            )
        if delta is None:
            gaussian = not is_pure([event])
            delta = float(entry.get("delta") or 0.0) if gaussian else 0.0
        header = {
            "schema": SCHEMA,
            "budget": {"epsilon": float(budget), "delta": float(delta)},
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    limit = float(header["budget"]["epsilon"])
    ledger_delta = float(header["budget"]["delta"])
    same = _group(entries).get(dataset, [])
    if same:
        check_same_units(same, f"dataset '{dataset}' of ledger '{path}'")
        unit, relation = same[0]["unit"], same[0]["relation"]
        if (entry["unit"], entry["relation"]) != (unit, relation):
            raise UsageError(
                f"dataset '{dataset}' of ledger '{path}' holds releases with unit {unit}, "
                f"relation {relation}; this release has unit {entry['unit']}, relation "
                f"{entry['relation']}. A composed total must refer to one unit and one "
                "neighbouring relation. If this release is about the same people, make it with "
                f"unit {unit} and relation {relation}; a separate dataset label or ledger for the "
                "same people would leave their total uncounted, so use one only for data about "
                "other people."
            )
    before_events = entry_events(same)
    before = compose(before_events, ledger_delta)
    after = compose([*before_events, event], ledger_delta)
    if after > limit * (1 + TOLERANCE):
        raise BudgetExceeded(
            f"this release (ε = {entry['epsilon']:g}) would take dataset '{dataset}' of the "
            f"ledger '{path}' from ε = {before:g} to {after:g}, over its budget of "
            f"{limit:g}; nothing was released."
        )
    return header, stored is None, after, head


def charge(
    path: str | os.PathLike[str],
    entry: dict[str, Any],
    budget: float | None = None,
    delta: float | None = None,
    *,
    sign_key: Any = None,
    verify_key: Any = None,
) -> float:
    """Append `entry` if its dataset's composed total stays within the stored budget; return
    that dataset's new total ε.

    A ledger that does not exist is created with `budget` (required then) and `delta` (default:
    the entry's δ if it has a Gaussian event, else 0). An existing ledger refuses a `budget` or
    `delta` that differs from its stored one. Raises `BudgetExceeded` (and writes nothing) if the
    total would exceed the budget.

    New lines are chained to the ledger's head and sealed; with `sign_key` (an Ed25519 private
    key) signed, as every line of a signed ledger must be. `verify_key` requires the ledger
    read first to be signed by that public key.
    """
    path = Path(path)
    event = _check_entry(entry)  # refuse unchargeable releases before taking the lock
    if "release" in entry:
        _check_digest(entry["release"])
    # Fail fast, without the lock (taking it leaves its lock file behind): the same admission
    # is judged again under the lock, against the ledger as it then is.
    _admit(path, entry, event, budget, delta, sign_key, verify_key)
    with locked(path):
        header, created, after, prev = _admit(
            path, entry, event, budget, delta, sign_key, verify_key
        )
        lines = []
        if created:
            lines.append(link(header, GENESIS, sign_key=sign_key))
            prev = head(lines[0])
        lines.append(link(entry, prev, sign_key=sign_key))
        text = "".join(json.dumps(item, allow_nan=False) + "\n" for item in lines)
        try:
            with path.open("a", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise InputError(
                f"cannot write ledger '{path}': {e.strerror or e}; nothing was charged.",
                file=str(path),
            ) from None
        return after


# --- the ledger from Python ------------------------------------------------------------------


def describe_release(doc: dict[str, Any]) -> tuple[str, str]:
    """The command that made a document and what its release covered, as a ledger entry
    records them (read from the document, so Python and the command line charge alike)."""
    schema = str(doc.get("schema", ""))
    if schema.startswith("fedeval.report/"):
        metrics = doc.get("metrics") or {}
        q = (metrics.get("curves") or {}).get("quantiles")
        n = len(metrics.get("thresholds") or [])
        return "evaluate", (f"evaluate: AUC, ECE, ROC/PR curves (Q = {q}), P/R/A at {n} thresholds")
    if schema.startswith("fedeval.curves/"):
        return "curves", f"curves: ROC and PR, Q = {(doc.get('curves') or {}).get('quantiles')}"
    if doc.get("kind") == "multiclass":
        name = doc.get("method_name") or doc.get("method")
        return "calibrate --multiclass", f"calibrate --multiclass: {name} map"
    if schema.startswith("fedeval.calibration-map/"):
        return "calibrate", f"calibrate: {doc.get('method')} map, ECE"
    if schema.startswith("fedeval.aggregate/"):
        return "aggregate", "aggregate: the release (every estimate from it is post-processing)"
    if schema.startswith("fedeval.compare/"):
        n = len((doc.get("metrics") or {}).get("thresholds") or [])
        return "compare", f"compare: baseline and candidate, AUC, AP, P/R/A at {n} thresholds"
    raise UsageError(f"a ledger charges fedeval reports and maps. Found schema {schema!r}.")


class Ledger:
    """A privacy ledger file, charged from Python as the ``fedeval`` command charges it.

    `budget` (ε) is needed to create the ledger and is then stored in it; given again, it must
    agree. `charge` refuses a release that would take `dataset` past the budget
    (`BudgetExceeded`, nothing written), under the same file lock as the command line.

    >>> import tempfile, pathlib
    >>> ledger = Ledger(pathlib.Path(tempfile.mkdtemp()) / "privacy.jsonl", budget=3.0)
    >>> ledger.check()  # before any work: writable, readable, budget agrees
    >>> # ledger.charge(fedeval.evaluate(y_true, y_score, epsilon=1.0))  → ε spent so far
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        budget: float | None = None,
        *,
        delta: float | None = None,
        dataset: str = DEFAULT_DATASET,
        sign_key: Any = None,
        verify_key: Any = None,
    ) -> None:
        self.path = Path(path)
        self.budget = budget
        self.delta = delta
        self.dataset = _check_dataset(dataset)
        self.sign_key = sign_key
        self.verify_key = verify_key

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r}, budget={self.budget!r}, dataset={self.dataset!r})"

    def check(self) -> None:
        """Refuse, before any work, a ledger that could not take this run's entry: not
        writable, unreadable, a budget that differs from the stored one, or a new ledger
        without its budget."""
        check_writable(self.path)
        stored, _, _, key = _read(self.path, self.verify_key)
        check_signer(self.path, key, self.sign_key, stored is None)
        if (
            check_budget(self.path, self.budget, self.delta, verify_key=self.verify_key) is None
            and self.budget is None
        ):
            raise UsageError(
                f"ledger '{self.path}' does not exist yet: create it by giving its `budget` "
                "once (an ε; the ledger stores it)."
            )

    def charge(self, result: Any, release: str | None = None) -> float | None:
        """Charge the release behind `result` (an evaluation, curves, a calibration result,
        their `to_dict()` document, or a saved release's document); return the dataset's
        composed ε after it, or None when nothing was charged.

        `release` is the release's charge id (`release_digest`, or the SHA-256 of a saved
        release's seal): the entry records it, and a release this ledger has charged already
        is not charged again. A result estimated from a saved release (``--from``) is charged
        once, the first time the ledger meets that release: estimates from a release are
        post-processing, but a release no ledger has counted still spent its ε. Without a
        charge id such a result is not charged (None). Federated runs (no noise) and seeded
        simulations are refused, as is a release past the budget (`BudgetExceeded`).
        """
        doc = result.to_dict() if hasattr(result, "to_dict") else result
        if not isinstance(doc, dict):
            raise UsageError(f"a ledger charges a fedeval result or document. Found {doc!r}.")
        from_saved = doc.get("simulation") is False
        if release is not None and charged(self.path, release, verify_key=self.verify_key):
            return None
        if from_saved and release is None:
            return None
        command, covered = describe_release(doc)
        if from_saved:
            command += " --from"
            covered = "a saved release no entry had charged yet (read by " + covered + ")"
        entry = make_entry(
            doc, command=command, covered=covered, dataset=self.dataset, release=release
        )
        return charge(
            self.path,
            entry,
            self.budget,
            self.delta,
            sign_key=self.sign_key,
            verify_key=self.verify_key,
        )

    def head(self) -> str:
        """The ledger's chain head: the digest of its last line (64 zeros when empty). Kept
        elsewhere, it shows a later truncation: the chain must still pass through it."""
        return _read(self.path, self.verify_key)[2]

    def limit(self) -> dict[str, float] | None:
        """The stored budget {epsilon, delta} (None before the first charge)."""
        header, _ = read_ledger(self.path, verify_key=self.verify_key)
        return None if header is None else dict(header["budget"])

    def summary(self) -> dict[str, Any]:
        """`fedeval.ledger-summary/3`: the budget, the chain's head and signer, each dataset's
        composed ε (with its unit, relation and composition) and every entry — what
        ``fedeval ledger --format json`` prints."""
        header, entries, head, key = _read(self.path, self.verify_key)
        limit = header["budget"] if header else None
        delta = limit["delta"] if limit else 0.0
        datasets = {}
        for name, spent in totals(header, entries).items():
            group = [e for e in entries if e.get("dataset", DEFAULT_DATASET) == name]
            datasets[name] = {
                "unit": group[0]["unit"],
                "relation": group[0]["relation"],
                "releases": len(group),
                "epsilon_spent": spent,
                "epsilon_left": None if limit is None else max(limit["epsilon"] - spent, 0.0),
                "composition": composition(group, delta),
                # The samplers' floating-point δ of each release (`fedeval.privacy.generator`),
                # added up: basic composition; the budget bounds ε.
                "sampler_delta": math.fsum(float(e.get("sampler_delta") or 0.0) for e in group),
            }
        return {
            "schema": "fedeval.ledger-summary/3",
            "budget": limit,
            "created": header.get("created") if header else None,
            "head": head,
            "signed_by": key,
            "datasets": datasets,
            "entries": entries,
        }
