"""Studies: many scenarios at once.

- :mod:`~simlab.studies.grid` reads a scenario's ``sweep:`` block into points (field paths:
  :mod:`~simlab.studies.paths`);
- :mod:`~simlab.studies.sweep` runs them on an executor (:mod:`~simlab.studies.executors`: a local process pool
  or Dask) into a resumable folder with ``sweep.csv``;
- :mod:`~simlab.studies.whatif` searches, per arm, the largest load (or smallest capacity) meeting an SLA
  (:mod:`~simlab.studies.sla`);
- :mod:`~simlab.studies.report_html` writes the self-contained ``report.html`` of a run, a sweep or a what-if
  (figures: :mod:`~simlab.studies.plots`).

See docs/studies.md.
"""

__all__ = ["load_sweep", "prepare_whatif", "run_sweep", "run_whatif", "write_report"]


def __getattr__(name: str):  # imported on first use: the studies pull in pandas and matplotlib
    if name == "load_sweep":
        from simlab.studies.grid import load_sweep

        return load_sweep
    if name == "run_sweep":
        from simlab.studies.sweep import run_sweep

        return run_sweep
    if name in ("prepare_whatif", "run_whatif"):
        from simlab.studies import whatif

        return getattr(whatif, name)
    if name == "write_report":
        from simlab.studies.report_html import write_report

        return write_report
    raise AttributeError(f"module 'simlab.studies' has no attribute {name!r}")
