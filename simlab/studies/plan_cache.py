"""A plan's simulated deployments kept on disk (``DIR/probes/<hash of the scenario>.json``), so that a rerun on
the same folder simulates only what is missing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Optional

from simlab.studies.grid import canonical_json


def scenario_key(data: dict) -> str:
    """The file name a deployment's scenario is kept under: a hash of its canonical JSON."""
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()[:20]


class ProbeCache:
    """The deployments simulated before, by :func:`scenario_key` (``folder`` None: nothing kept)."""

    def __init__(self, folder: Optional[Path]):
        self.folder = folder
        self.known: dict[str, dict] = {}
        if folder is None or not folder.is_dir():
            return
        for path in folder.glob("*.json"):
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                self.known[path.stem] = {"metrics": doc["metrics"], "error": doc.get("error")}
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a damaged file is simulated again

    def get(self, key: str) -> Optional[dict]:
        return self.known.get(key)

    def store(self, key: str, data: dict, result: dict) -> None:
        """Keep a deployment's metrics (or its input error) beside its scenario."""
        if self.folder is None:
            return
        from simlab.common.outputs import write_file_atomic
        from simlab.common.version import __version__

        doc = {"generator": f"simlab {__version__}", "scenario": data, "metrics": result["metrics"],
               "error": result["error"]}
        write_file_atomic(self.folder / f"{key}.json", json.dumps(doc) + "\n")
